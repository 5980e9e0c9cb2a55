// SPDX-License-Identifier: Apache-2.0
// The Tensor Memory Accelerator (sm_90) on the device side: bulk tensor copies from
// global to shared memory described by a tensor map (tensor_map.hpp builds one on the
// host), completing their bytes on an mbarrier (mbarrier.cuh); and the register
// budget handoff between a kernel's warpgroups (setmaxnreg). Each wrapper names its
// PTX instruction.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/common/mbarrier.cuh"

namespace kvinfer::cuda::tma {

// prefetch.tensormap: brings a tensor map (a kernel parameter) into the descriptor
// cache ahead of the first copy that uses it.
__device__ __forceinline__ void prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

// cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes:
// the box of `map` at coordinates (c0, c1, c2) (in elements, innermost first) into
// shared memory at `dst` (laid out and swizzled as the map says), its bytes completed
// on `bar`. Rows of the box outside the tensor arrive as zeros.
__device__ __forceinline__ void load_3d(void* dst, const CUtensorMap* map, std::uint64_t* bar, int c0, int c1,
                                        int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(mbarrier::addr(bar))
      : "memory");
}

// setmaxnreg.{inc,dec}.sync.aligned.u32: every warp of the warpgroup moves its
// register allocation to kRegs per thread (a multiple of 8 in [24, 256]): producers
// give theirs up, so that consumers can hold larger accumulators.
template <int kRegs>
__device__ __forceinline__ void grow_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void shrink_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

}  // namespace kvinfer::cuda::tma
