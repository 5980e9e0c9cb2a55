// SPDX-License-Identifier: Apache-2.0
#include "cpu/kernels.hpp"

namespace kvinfer::cpu {
namespace {

constexpr CpuKernels kPortable{portable::load_row, portable::store_row, portable::block_scores,
                               portable::block_softmax, portable::block_accumulate};
#if defined(KVINFER_CPU_HAVE_AVX2)
constexpr CpuKernels kAvx2{avx2::load_row, avx2::store_row, avx2::block_scores, avx2::block_softmax,
                           avx2::block_accumulate};
#endif

}  // namespace

const CpuKernels& kernels_for(CpuIsa isa) {
#if defined(KVINFER_CPU_HAVE_AVX2)
  if (isa == CpuIsa::kAvx2) return kAvx2;
#endif
  return kPortable;
}

const CpuKernels& kernels() {
  static const CpuKernels& table = kernels_for(cpu_isa());
  return table;
}

}  // namespace kvinfer::cpu
