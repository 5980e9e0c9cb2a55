// SPDX-License-Identifier: Apache-2.0
// Launching prefill: which kernel configuration serves a q tile (the portable
// mma.sync kernel of prefill_kernel.cuh in its tile shapes, or the Hopper mainloop
// of prefill_kernel_sm90.cuh), its launch and its occupancy. Included only by the
// generated instance files (cmake/KvinferInstances.cmake), which instantiate
// KVINFER_INSTANTIATE_PREFILL once each.
#pragma once

#include "cuda/attention/decode_tile_fp8.cuh"
#include "cuda/attention/prefill_kernel.cuh"
#include "cuda/attention/prefill_kernel_sm90.cuh"
#include "kvinfer/core/error.hpp"

#include <string>

namespace kvinfer::cuda {

// The kernel configurations. The wide tile (128 rows) halves the K/V traffic per
// query row: 4 warps of 32 rows where the accumulators fit (head_dim_vo <= 128),
// else 8 warps of 16 rows. The narrow tile (64 rows: 4 warps of 16) serves short
// requests and the general logits. The decode tile (16 rows: one warp, 16-key
// tiles) holds a GQA group's query rows of one token: many small CTAs per SM keep
// enough KV in flight for a memory-bound problem; with fp8 KV it converts K and V in
// registers (decode_tile_fp8.cuh).
//
// Item warps (item_warps.cuh): the decode tiles (the fp8 one, and the 16-bit one at
// head_dim_vo <= 128, where the selector uses it) have a second instance whose CTA
// runs one item on several warps; `item_warps` asks for it.
template <class TKV, int DVO>
inline constexpr bool kHasItemWarps = sizeof(TKV) == 2 && DVO <= 128;
template <class TQ, class TKV, class TO, int DQK, int DVO, class F>
void with_prefill_kernel(int q_tile_rows, bool general, bool item_warps, F&& f) {
  if (general) {
    f(PrefillKernel<TQ, TKV, TO, DQK, DVO, 4, 1, true>{});
  } else if (q_tile_rows == 16) {
    if constexpr (kHasFp8DecodeTile<TQ, TKV, DQK, DVO>) {
      if (item_warps) return f(DecodeFp8Kernel<TQ, TKV, TO, DQK, true>{});
      return f(DecodeFp8Kernel<TQ, TKV, TO, DQK>{});
    }
    if constexpr (kHasItemWarps<TKV, DVO>) {
      if (item_warps) return f(PrefillKernel<TQ, TKV, TO, DQK, DVO, 1, 1, false, true>{});
    }
    f(PrefillKernel<TQ, TKV, TO, DQK, DVO, 1, 1, false>{});
  } else if (q_tile_rows == 128) {
    if constexpr (DVO <= 128) {
      return f(PrefillKernel<TQ, TKV, TO, DQK, DVO, 4, 2, false>{});
    }
    f(PrefillKernel<TQ, TKV, TO, DQK, DVO, 8, 1, false>{});
  } else {
    f(PrefillKernel<TQ, TKV, TO, DQK, DVO, 4, 1, false>{});
  }
}

// The most item warps a kernel runs per CTA (1: it has none).
template <class K>
int max_item_warps(const K&) {
  if constexpr (requires { K::max_item_warps(); }) {
    return K::max_item_warps();
  } else {
    return 1;
  }
}

template <class K>
void launch(const K&, const AttentionKernelParams& p, std::int64_t grid, cudaStream_t stream) {
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
                "only the one-warp decode tile runs item warps (a selector bug)");
  }
  launch_after_previous(K::kernel, dim3(static_cast<unsigned>(grid)), K::kThreads, K::kSmem, stream,
                        p.programmatic, p);
}
template <class K>
int occupancy(const K&) {
  int blocks = 0;
  K::prepare();
  KVINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, K::kernel, K::kThreads, K::kSmem));
  return blocks;
}

// Launches the portable prefill kernel for q tiles of q_tile_rows (16, 64 or 128)
// packed rows.
template <class TQ, class TKV, class TO, int DQK, int DVO>
void launch_prefill(const AttentionKernelParams& p, int q_tile_rows, std::int64_t grid, cudaStream_t stream) {
  const bool general = p.custom_mask != nullptr || p.alibi_slopes != nullptr || p.logits_soft_cap > 0.0f;
  if (kHasFp8DecodeTile<TQ, TKV, DQK, DVO> && q_tile_rows == 16 && !general && p.rope) {
    throw Error("attention", "kernel", "fp8 decode tile with RoPE", "not supported by this tile (a selector bug)");
  }
  with_prefill_kernel<TQ, TKV, TO, DQK, DVO>(q_tile_rows, general, p.item_warps > 1,
                                             [&](auto k) { launch(k, p, grid, stream); });
}

// Resident CTAs per multiprocessor for a q tile (the planner's budget).
template <class TQ, class TKV, class TO, int DQK, int DVO>
int prefill_occupancy(int q_tile_rows) {
  int blocks = 0;
  with_prefill_kernel<TQ, TKV, TO, DQK, DVO>(q_tile_rows, false, false, [&](auto k) { blocks = occupancy(k); });
  return blocks;
}

// The most item warps a q tile's kernel runs per CTA (1: none).
template <class TQ, class TKV, class TO, int DQK, int DVO>
int prefill_max_item_warps(int q_tile_rows) {
  int warps = 1;
  with_prefill_kernel<TQ, TKV, TO, DQK, DVO>(q_tile_rows, false, true, [&](auto k) { warps = max_item_warps(k); });
  return warps;
}

// The Hopper mainloop (128-row tiles only): for the instances kHasWgmmaPrefill
// admits; the selector never asks it of the others.
template <class TQ, class TKV, class TO, int DQK, int DVO>
void launch_prefill_wgmma(const AttentionKernelParams& p, int q_tile_rows, std::int64_t grid, cudaStream_t stream) {
  if constexpr (kHasWgmmaPrefill<TQ, TKV, DQK, DVO>) {
    // Byte strides of K and V past 32 bits (caches of more than 2 GiB per page or token
    // row) take the portable kernel, whose address math is 64-bit throughout.
    const auto fits = [](std::int64_t stride) { return stride * 2 < (std::int64_t(1) << 31) && stride >= 0; };
    const bool small_strides = fits(p.k_stride_page) && fits(p.k_stride_token) && fits(p.v_stride_page) &&
                               fits(p.v_stride_token);
    if (q_tile_rows == HopperPrefillShape<DQK>::kTileRows && !small_strides) {
      return launch_prefill<TQ, TKV, TO, DQK, DVO>(p, q_tile_rows, grid, stream);
    }
    if (q_tile_rows == HopperPrefillShape<DQK>::kTileRows) {
      // Paged and ragged KV are separate kernels: the paged one keeps page ids in flight.
      if (p.kv_indices != nullptr) return launch(HopperPrefillKernel<TQ, TO, DQK, true>{}, p, grid, stream);
      return launch(HopperPrefillKernel<TQ, TO, DQK, false>{}, p, grid, stream);
    }
  }
  throw Error("attention", "kernel", "wgmma prefill", "not compiled for this instance or tile (a selector bug)");
}
template <class TQ, class TKV, class TO, int DQK, int DVO>
int prefill_wgmma_occupancy(int q_tile_rows) {
  if constexpr (kHasWgmmaPrefill<TQ, TKV, DQK, DVO>) {
    if (q_tile_rows == HopperPrefillShape<DQK>::kTileRows) return occupancy(HopperPrefillKernel<TQ, TO, DQK, true>{});
  }
  throw Error("attention", "kernel", "wgmma prefill", "not compiled for this instance or tile (a selector bug)");
}

#define KVINFER_INSTANTIATE_PREFILL(TQ, TKV, DQK, DVO)                                                                 \
  template void launch_prefill<TQ, TKV, TQ, DQK, DVO>(const AttentionKernelParams&, int, std::int64_t, cudaStream_t); \
  template int prefill_occupancy<TQ, TKV, TQ, DQK, DVO>(int);                                                          \
  template int prefill_max_item_warps<TQ, TKV, TQ, DQK, DVO>(int);                                                     \
  template void launch_prefill_wgmma<TQ, TKV, TQ, DQK, DVO>(const AttentionKernelParams&, int, std::int64_t,          \
                                                              cudaStream_t);                                           \
  template int prefill_wgmma_occupancy<TQ, TKV, TQ, DQK, DVO>(int);

}  // namespace kvinfer::cuda
