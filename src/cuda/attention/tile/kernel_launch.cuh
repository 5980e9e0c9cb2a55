// SPDX-License-Identifier: Apache-2.0
// Launch, occupancy and item warps of a tile kernel described by a kernel struct K
// (K::kernel, K::kThreads, K::kSmem, K::prepare(); item-warp kernels also
// K::kItemWarps, K::kTileSmem, K::max_item_warps()): the tensor-core tile, the fp8
// decode tile and the wgmma prefill share them.
#pragma once

#include <string>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/check.cuh"
#include "cuda/common/launch.cuh"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda {

// The most item warps a kernel runs per CTA (1: it has none).
template <class K>
int tile_kernel_item_warps(const K&) {
  if constexpr (requires { K::max_item_warps(); }) {
    return K::max_item_warps();
  } else {
    return 1;
  }
}

template <class K>
void launch_tile_kernel(const K&, const AttentionKernelParams& p, std::int64_t grid, cudaStream_t stream) {
  static const bool prepared = (K::prepare(), true);
  (void)prepared;
  if (p.item_warps > 1) {
    if constexpr (requires { K::kItemWarps; }) {
      if constexpr (K::kItemWarps) {
        launch_after_previous(K::kernel, dim3(static_cast<unsigned>(grid)), K::kThreads * p.item_warps,
                              p.item_warps * K::kTileSmem, stream, p.programmatic, p);
        return;
      }
    }
    throw Error("attention", "item_warps", std::to_string(p.item_warps),
                "only the one-warp decode tiles run item warps (a selector bug)");
  }
  launch_after_previous(K::kernel, dim3(static_cast<unsigned>(grid)), K::kThreads, K::kSmem, stream,
                        p.programmatic, p);
}

template <class K>
int tile_kernel_occupancy(const K&) {
  int blocks = 0;
  K::prepare();
  KVINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, K::kernel, K::kThreads, K::kSmem));
  return blocks;
}

}  // namespace kvinfer::cuda
