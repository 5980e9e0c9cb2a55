// SPDX-License-Identifier: Apache-2.0
// The MLA kernel selector of the CUDA backend as a pure function: a checked problem,
// the rows its longest item holds and the compiled MLA instances (plain values), to
// the key run() launches. Unit-tested on the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/attention_params.hpp"
#include "core/mla_params.hpp"

namespace kvinfer::detail {

// One compiled instance of the MLA kernel (cmake/KvinferInstances.cmake).
struct MlaInstance {
  DType q = DType::kBF16, kv = DType::kBF16;
};

struct MlaKernelCaps {
  std::vector<MlaInstance> instances;  // a key's `instance` is an index of this list
  bool hopper = false;                 // an sm_90 device running this build's sm_90a code
  // Items of 64 rows on the wgmma kernel where it runs; off: the mma.sync kernel (the
  // CUDA backend's KVINFER_MLA_WGMMA=0, to measure and test both).
  bool wgmma = true;
  std::string preset = "default";      // the instance preset, for the error that names it
};

// The key of the MLA kernel for the problem: its family, its instance and its items'
// rows (16, 32 or 64: launch_rows). Items of 64 rows with 16-bit KV of the query's type
// take the wgmma kernel on Hopper (kMlaWgmma), everything else the mma.sync kernel
// (kMla). Throws kvinfer::Error naming the preset when no instance is compiled.
KernelKey select_mla_kernel(const MLAProblem& problem, std::int64_t max_item_rows, const MlaKernelCaps& caps);

}  // namespace kvinfer::detail
