// SPDX-License-Identifier: Apache-2.0
// The tensor-core tile family's instance API (family.hpp): the tile shapes a key's
// rows and variant name.
//   128 rows  the wide tile: 4 warps of 32 rows where the accumulators fit
//             (head_dim_vo <= 128), else 8 warps of 16 rows; it halves the K/V
//             traffic per query row. None above head_dim 256.
//    64 rows  the narrow tile (4 warps of 16): short requests, the general logits
//             (KernelVariant::kGeneralLogits: custom mask, ALiBi, soft cap), and
//             every prefill above head_dim 256 (its warps split into column slices:
//             PrefillShape)
//    16 rows  the decode tile (one warp, 16-key tiles): a GQA group's rows of one
//             token; many small CTAs per SM keep enough KV in flight for a
//             memory-bound problem. At 16-bit KV and head_dim_vo <= 128 it also has
//             an item-warp kernel (tile/item_warps.cuh), run where the plan's
//             Schedule::item_warps asks for it.
#pragma once

#include <type_traits>

#include "cuda/attention/family.hpp"
#include "cuda/attention/tensor_core_tile/kernel.cuh"
#include "cuda/attention/tile/kernel_launch.cuh"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda::tensor_core_tile {

// The 16-row tile's item-warp kernel: its warps' states fit the tile's K/V stages
// (16-bit KV) and its accumulators the registers of 8 warps per SM (head_dim_vo <= 128).
template <class TKV, int DVO>
inline constexpr bool kItemWarpTile = sizeof(TKV) == 2 && DVO <= 128;

// The 128-row tile: heads above 256 dims would need 256 KiB of shared memory for it
// (Q and two stages of 32 keys), so they take 64-row tiles (selector rule 5).
template <int DQK, int DVO>
inline constexpr bool kWideTile = DQK <= 256 && DVO <= 256;

// The kernel a key names, passed to f. kPadded: the padded tile's kernels (the padded
// tile family, padded_tile/instance.cuh), without item warps.
template <class TQ, class TKV, int DQK, int DVO, bool kPadded = false, class F>
void with_kernel(const detail::KernelKey& key, bool item_warps, F&& f) {
  if (key.variant == detail::KernelVariant::kGeneralLogits) {
    f(PrefillKernel<TQ, TKV, DQK, DVO, 4, 1, true, false, kPadded>{});
  } else if (key.launch_rows == 16) {
    if constexpr (kItemWarpTile<TKV, DVO> && !kPadded) {
      if (item_warps) return f(PrefillKernel<TQ, TKV, DQK, DVO, 1, 1, false, true>{});
    }
    f(PrefillKernel<TQ, TKV, DQK, DVO, 1, 1, false, false, kPadded>{});
  } else if (key.launch_rows == 128) {
    if constexpr (!kWideTile<DQK, DVO>) {
      throw Error("attention", "kernel", "the tensor-core tile of 128 rows",
                  "has no instance above head_dim 256 (the selector plans 64 rows there)");
    } else if constexpr (DVO <= 128) {
      f(PrefillKernel<TQ, TKV, DQK, DVO, 4, 2, false, false, kPadded>{});
    } else {
      f(PrefillKernel<TQ, TKV, DQK, DVO, 8, 1, false, false, kPadded>{});
    }
  } else {
    f(PrefillKernel<TQ, TKV, DQK, DVO, 4, 1, false, false, kPadded>{});
  }
}

template <class TQ, class TKV, int DQK, int DVO>
void launch(const AttentionKernelParams& p, const detail::KernelKey& key, std::int64_t grid, cudaStream_t stream) {
  with_kernel<TQ, TKV, DQK, DVO>(key, p.item_warps > 1, [&](auto k) { launch_tile_kernel(k, p, grid, stream); });
}

template <class TQ, class TKV, int DQK, int DVO>
int occupancy(const detail::KernelKey& key) {
  int blocks = 0;
  with_kernel<TQ, TKV, DQK, DVO>(key, false, [&](auto k) { blocks = tile_kernel_occupancy(k); });
  return blocks;
}

template <class TQ, class TKV, int DQK, int DVO>
int max_item_warps(const detail::KernelKey& key) {
  int warps = 1;
  with_kernel<TQ, TKV, DQK, DVO>(key, true, [&](auto k) { warps = tile_kernel_item_warps(k); });
  return warps;
}

}  // namespace kvinfer::cuda::tensor_core_tile
