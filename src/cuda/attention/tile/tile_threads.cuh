// SPDX-License-Identifier: Apache-2.0
// Which threads share a tile and their barrier: the CTA, or one warp of an item-warp
// CTA (item_warps.cuh).
#pragma once

#include <cuda_runtime.h>

namespace kvinfer::cuda {

// The thread's index among the threads that share a tile, and their barrier: the
// CTA's, except in the item-warp instance of the one-warp (decode) tile, whose CTA
// holds several warps that each run a tile of their own (item_warps.cuh): there the
// lane, and the warp's own barrier, __syncwarp. Not a named barrier per warp
// (bar.sync 1 + warp, 32), which the fp8 tile had (2.7% faster at fp8 16 x 8k, 2%
// slower at 1 x 32k): compute-sanitizer's racecheck does not follow it, and reports
// the CTA merge's reads, after __syncthreads, as racing with the warps' state stores
// before it (docs/log/performance-2026-11-30.md, session 14, "racecheck and the fp8 tile's barrier").
template <bool kItemWarps>
__device__ __forceinline__ int tile_thread() {
  return kItemWarps ? int(threadIdx.x) % 32 : int(threadIdx.x);
}
template <bool kItemWarps>
__device__ __forceinline__ void tile_sync() {
  if constexpr (kItemWarps) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

}  // namespace kvinfer::cuda
