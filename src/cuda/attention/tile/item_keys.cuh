// SPDX-License-Identifier: Apache-2.0
// The keys a work item attends: its request's mask, the range any row sees and the
// range every row sees (tiles inside it skip the per-element mask).
#pragma once

#include <cuda_runtime.h>
#include "core/mask_policy.hpp"
#include "cuda/attention/attention_kernel_params.cuh"

namespace kvinfer::cuda {

// What a work item attends: its request's mask (custom bits only where the kernel
// applies them), the keys any of its rows can see within its chunk, [key_begin,
// key_end) (empty when end <= begin), and those all of them see, [full_lo, full_end)
// (none under custom bits): a key tile inside the latter needs no per-element mask,
// two compares instead of classifying the rows' bounds for every tile.
struct ItemKeys {
  detail::RequestMask mask;
  int key_begin, key_end;
  int full_lo, full_end;
  int step = 0;  // keys from one of this warp's tiles to its next (keep_warp_turns); 0: back to back
  __device__ __forceinline__ int tile_step(int keys_per_tile) const { return step > 0 ? step : keys_per_tile; }
  __device__ __forceinline__ int num_tiles(int keys_per_tile) const {
    const int s = tile_step(keys_per_tile);
    return key_end > key_begin ? (key_end - key_begin + s - 1) / s : 0;
  }
  __device__ __forceinline__ bool needs_mask(int key0, int keys_per_tile) const {
    return key0 < full_lo || key0 + keys_per_tile > full_end;
  }
  // Warp w of `warps` (item warps): tiles w, w + warps, w + 2 warps, ... of the keys, so
  // that the CTA's warps copy neighbouring tiles at about the same time (one stream of
  // requests per CTA rather than one per warp); a warp past the last tile gets none.
  __device__ __forceinline__ void keep_warp_turns(int w, int warps, int keys_per_tile) {
    const int tiles = num_tiles(keys_per_tile);
    step = warps * keys_per_tile;
    key_begin = w < tiles ? key_begin + w * keys_per_tile : key_end;
  }
};
__device__ __forceinline__ ItemKeys item_keys(const AttentionKernelParams& p, const detail::WorkItem& item,
                                              const detail::RequestInfo& r, const std::uint8_t* custom) {
  ItemKeys k;
  k.mask.causal = p.mask.causal;
  k.mask.window_left = p.mask.window_left;
  k.mask.custom = custom;
  k.mask.qo_len = r.qo_len;
  k.mask.kv_len = r.kv_len;
  const int tok_lo = item.row_begin / p.heads.group_size;  // the item's first and last tokens
  const int tok_hi = (item.row_end - 1) / p.heads.group_size;
  k.key_begin = max(item.kv_begin, k.mask.first_key(tok_lo));
  k.key_end = min(item.kv_end, k.mask.last_key(tok_hi));
  k.mask.common_keys(tok_lo, tok_hi + 1, &k.full_lo, &k.full_end);
  k.full_end = custom != nullptr ? k.full_lo : min(k.full_end, k.key_end);
  return k;
}

// The keys of an item as far as the item alone tells (before its request's entry
// arrives): its chunk, which the planner clipped to the keys the request's rows see,
// so exactly item_keys' range where the item holds every row of its request (the
// decode tiles' items); with item warps, this warp's share. Masks are not set.
template <bool kItemWarps>
__device__ __forceinline__ ItemKeys item_keys_ahead(const detail::WorkItem& item, int keys_per_tile) {
  ItemKeys k{};
  k.key_begin = item.kv_begin;
  k.key_end = item.kv_end;
  k.full_lo = k.key_begin;
  k.full_end = k.key_end;
  if constexpr (kItemWarps) k.keep_warp_turns(int(threadIdx.x) / 32, int(blockDim.x) / 32, keys_per_tile);
  return k;
}

}  // namespace kvinfer::cuda
