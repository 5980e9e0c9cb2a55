// SPDX-License-Identifier: Apache-2.0
// Kernel variants of the paged append (internal: benchmarks and tests compare them;
// append_paged_kv_cache uses kDefaultAppendKernel). Variants differ only in how many
// 16-byte vectors a thread keeps in flight and where (registers or shared memory);
// rows whose pointers or strides do not allow 16-byte vectors always take the
// register kernel with narrower vectors.
#pragma once

#include <string_view>

#include "core/op_params.hpp"

namespace kvinfer::cuda {

enum class AppendKernel {
  kRegisters4,      // 128 threads x 4 vectors in registers (the default: fastest measured)
  kRegisters8,      // 128 threads x 8 vectors in registers
  kAsync8Prefetch,  // 256 threads x 8 vectors staged in shared memory by cp.async, one
                    // wave for 5000 tokens; page table prefetched to L2 at the start
};
inline constexpr AppendKernel kAllAppendKernels[] = {AppendKernel::kRegisters4, AppendKernel::kRegisters8,
                                                     AppendKernel::kAsync8Prefetch};

// The kernel append_paged_kv_cache and append_paged_mla_kv_cache use.
AppendKernel default_append_kernel();
std::string_view append_kernel_name(AppendKernel k);

void append_paged_kv_cache_with(const detail::AppendPagedKVParams& p, AppendKernel kernel);

}  // namespace kvinfer::cuda
