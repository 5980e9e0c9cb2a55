// SPDX-License-Identifier: Apache-2.0
// The fp8 decode tile's instance API (family.hpp): 16 packed rows, one warp per CTA
// or item warps (Schedule::item_warps). The selector runs it on 16-bit q with fp8 KV,
// equal head dims 64 or 128, no RoPE (K is converted in registers, where RoPE cannot
// rotate it) and none of the general logits.
#pragma once

#include <string>

#include "cuda/attention/family.hpp"
#include "cuda/attention/fp8_decode_tile/kernel.cuh"
#include "cuda/attention/tile/kernel_launch.cuh"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda::fp8_decode_tile {

template <class TQ, class TKV, int DQK, int DVO>
void launch(const AttentionKernelParams& p, const detail::KernelKey& key, std::int64_t grid, cudaStream_t stream) {
  static_assert(sizeof(TKV) == 1 && sizeof(TQ) == 2 && DQK == DVO && DQK <= 128, "16-bit q, fp8 KV, head_dim <= 128");
  if (p.logits.rope || key.launch_rows != 16) {
    throw Error("attention", "kernel", "fp8 decode tile", "runs 16-row items without RoPE (a selector bug)");
  }
  if (p.item_warps > 1) return launch_tile_kernel(DecodeFp8Kernel<TQ, TKV, DQK, true>{}, p, grid, stream);
  launch_tile_kernel(DecodeFp8Kernel<TQ, TKV, DQK>{}, p, grid, stream);
}

template <class TQ, class TKV, int DQK, int DVO>
int occupancy(const detail::KernelKey&) {
  return tile_kernel_occupancy(DecodeFp8Kernel<TQ, TKV, DQK>{});
}

template <class TQ, class TKV, int DQK, int DVO>
int max_item_warps(const detail::KernelKey&) {
  return tile_kernel_item_warps(DecodeFp8Kernel<TQ, TKV, DQK, true>{});
}

}  // namespace kvinfer::cuda::fp8_decode_tile
