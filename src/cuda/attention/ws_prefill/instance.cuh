// SPDX-License-Identifier: Apache-2.0
// The warp-specialised prefill family's instance API (family.hpp): 128-row tiles of
// ragged KV (K and V copied by TMA from tensor maps made at each launch: the tensors'
// addresses may change from run to run; encoding is host arithmetic) or of a paged
// cache (rows gathered by page id) on sm_90a.
#pragma once

#include <algorithm>
#include <type_traits>

#include "cuda/attention/family.hpp"
#include "cuda/attention/tile/kernel_launch.cuh"
#include "cuda/attention/wgmma_prefill/instance.cuh"
#include "cuda/attention/ws_prefill/kernel.cuh"
#include "cuda/common/tensor_map.hpp"
#include "core/kernel_key.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda::ws_prefill {

// The tensor map of ragged K or V: dims (D, tokens, heads), boxes of 64 columns x
// kKeys tokens of one head.
template <int D>
bool encode_kv_map(CUtensorMap& map, const KVTensor& t) {
  const std::uint64_t dims[3] = {std::uint64_t(D), std::uint64_t(t.tokens), std::uint64_t(t.heads)};
  const std::uint64_t strides[2] = {std::uint64_t(t.stride_token) * 2, std::uint64_t(t.stride_head) * 2};
  const std::uint32_t box[3] = {64, std::uint32_t(WsPrefillShape<D>::kKeys), 1};
  return t.stride_token > 0 && t.stride_head > 0 && encode_tensor_map_16bit_3d(map, t.data, dims, strides, box);
}

template <class TQ, class TKV, int DQK, int DVO>
void launch(const AttentionKernelParams& p, const detail::KernelKey& key, std::int64_t grid, cudaStream_t stream) {
  static_assert(std::is_same_v<TQ, TKV> && DQK == DVO, "16-bit KV of the query's type, one head dim");
  if (key.launch_rows != WsPrefillShape<DQK>::kTileRows) {
    throw Error("attention", "kernel", "warp-specialised prefill", "runs 128-row tiles (a selector bug)");
  }
  WsPrefillParams wp{};
  wp.attn = p;
  // Ragged tensors TMA cannot address (strides past 2^40 bytes or not multiples of 16
  // bytes, which only run() sees), and paged K and V of different strides (the gathers
  // share one row offset between them), take the wgmma mainloop of the same tile and
  // plan.
  const bool runs_here =
      p.kv.paged() ? p.kv.k.stride_page == p.kv.v.stride_page && p.kv.k.stride_token == p.kv.v.stride_token
                   : encode_kv_map<DQK>(wp.k_map, p.kv.k) && encode_kv_map<DQK>(wp.v_map, p.kv.v);
  if (!runs_here) return wgmma_prefill::launch<TQ, TKV, DQK, DVO>(p, key, grid, stream);
  using K = WsPrefillKernel<TQ, DQK>;
  static const bool prepared = (K::prepare(), true);
  (void)prepared;
  launch_after_previous(K::kernel, dim3(static_cast<unsigned>(grid)), K::kThreads, K::kSmem, stream, p.programmatic,
                        wp);
}

template <class TQ, class TKV, int DQK, int DVO>
int occupancy(const detail::KernelKey&) {
  return tile_kernel_occupancy(WsPrefillKernel<TQ, DQK>{});
}

template <class TQ, class TKV, int DQK, int DVO>
int max_item_warps(const detail::KernelKey&) {
  return 1;
}

}  // namespace kvinfer::cuda::ws_prefill
