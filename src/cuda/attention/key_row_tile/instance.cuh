// SPDX-License-Identifier: Apache-2.0
// The key-row decode tile's instance API (family.hpp): items of up to 8 packed rows,
// one warp per CTA or item warps (Schedule::item_warps). The selector runs it on
// 16-bit KV of the query's type, decode items of 2 or more rows and plain logits: at
// head_dim 64 its one-warp CTAs take 124 registers, so more of them share an SM (64 x
// 4k 5% faster than the 16-row tile); at 256 only it has the registers for the
// accumulators; at 128 it runs the 16-row tile's plans (attention_selector.cpp,
// key_row_decode).
#pragma once

#include "cuda/attention/family.hpp"
#include "cuda/attention/key_row_tile/kernel.cuh"

namespace kvinfer::cuda::key_row_tile {

template <class TQ, class TKV, int DQK, int DVO>
void launch(const AttentionKernelParams& p, const detail::KernelKey&, std::int64_t grid, cudaStream_t stream) {
  static_assert(std::is_same_v<TQ, TKV> && DQK == DVO, "16-bit KV of the query's type, one head dim");
  DecodeKqKernel<TQ, DQK>::launch(p, grid, stream);
}

template <class TQ, class TKV, int DQK, int DVO>
int occupancy(const detail::KernelKey&) {
  return DecodeKqKernel<TQ, DQK>::occupancy();
}

template <class TQ, class TKV, int DQK, int DVO>
int max_item_warps(const detail::KernelKey&) {
  return DecodeKqKernel<TQ, DQK>::max_item_warps();
}

}  // namespace kvinfer::cuda::key_row_tile
