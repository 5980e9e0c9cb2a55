// SPDX-License-Identifier: Apache-2.0
// The padded tile family's instance API (family.hpp): the tensor-core tile's kernels
// (tensor_core_tile/kernel.cuh, kPadded) over head dims smaller than the instance's,
// multiples of 16: Q, K and V rows are copied up to the problem's head dims
// (AttentionKernelParams::dims) and zero past them, so the padding adds nothing to
// Q K^T; RoPE pairs the problem's dims; O and the partial states are written up to its
// head_dim_vo. It serves, in the `full` preset, every head dim the CPU takes that no
// exact instance has (the selector pads to the smallest instance that holds both head
// dims: docs/kernels.md, "Padded tile"). Tile shapes as the tensor-core tile's; no item
// warps.
#pragma once

#include "cuda/attention/family.hpp"
#include "cuda/attention/tensor_core_tile/instance.cuh"

namespace kvinfer::cuda::padded_tile {

template <class TQ, class TKV, int DQK, int DVO>
void launch(const AttentionKernelParams& p, const detail::KernelKey& key, std::int64_t grid, cudaStream_t stream) {
  tensor_core_tile::with_kernel<TQ, TKV, DQK, DVO, true>(key, false,
                                                         [&](auto k) { launch_tile_kernel(k, p, grid, stream); });
}

template <class TQ, class TKV, int DQK, int DVO>
int occupancy(const detail::KernelKey& key) {
  int blocks = 0;
  tensor_core_tile::with_kernel<TQ, TKV, DQK, DVO, true>(key, false, [&](auto k) { blocks = tile_kernel_occupancy(k); });
  return blocks;
}

template <class TQ, class TKV, int DQK, int DVO>
int max_item_warps(const detail::KernelKey&) {
  return 1;
}

}  // namespace kvinfer::cuda::padded_tile
