// SPDX-License-Identifier: Apache-2.0
// The wgmma prefill family's instance API (family.hpp): 128-row tiles on sm_90a.
// Paged and ragged KV are separate kernels (the paged one keeps page ids in flight).
#pragma once

#include "cuda/attention/family.hpp"
#include "cuda/attention/tensor_core_tile/instance.cuh"
#include "cuda/attention/tile/kernel_launch.cuh"
#include "cuda/attention/wgmma_prefill/kernel.cuh"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda::wgmma_prefill {

template <class TQ, class TKV, int DQK, int DVO>
void launch(const AttentionKernelParams& p, const detail::KernelKey& key, std::int64_t grid, cudaStream_t stream) {
  static_assert(std::is_same_v<TQ, TKV> && DQK == DVO, "16-bit KV of the query's type, one head dim");
  if (key.launch_rows != HopperPrefillShape<DQK>::kTileRows) {
    throw Error("attention", "kernel", "wgmma prefill", "runs 128-row tiles only (a selector bug)");
  }
  // Its address math is 32-bit: byte strides of K and V past 31 bits (caches of more
  // than 2 GiB per page or token row), which only run() sees, take the tensor-core
  // tile of the same rows, whose address math is 64-bit throughout.
  const auto fits = [](std::int64_t stride) { return stride * 2 < (std::int64_t(1) << 31) && stride >= 0; };
  if (!(fits(p.kv.k.stride_page) && fits(p.kv.k.stride_token) && fits(p.kv.v.stride_page) &&
        fits(p.kv.v.stride_token))) {
    return tensor_core_tile::launch<TQ, TKV, DQK, DVO>(p, key, grid, stream);
  }
  if (p.kv.paged()) return launch_tile_kernel(HopperPrefillKernel<TQ, DQK, true>{}, p, grid, stream);
  launch_tile_kernel(HopperPrefillKernel<TQ, DQK, false>{}, p, grid, stream);
}

template <class TQ, class TKV, int DQK, int DVO>
int occupancy(const detail::KernelKey&) {
  return tile_kernel_occupancy(HopperPrefillKernel<TQ, DQK, true>{});
}

template <class TQ, class TKV, int DQK, int DVO>
int max_item_warps(const detail::KernelKey&) {
  return 1;
}

}  // namespace kvinfer::cuda::wgmma_prefill
