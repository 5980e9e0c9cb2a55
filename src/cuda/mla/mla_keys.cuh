// SPDX-License-Identifier: Apache-2.0
// The keys an MLA work item's rows see: the copies need the range and the page ids,
// the softmax where each row's keys end; computed once per item from the request's
// mask, so both take them from here. Included by mla_kernel.cuh.
#pragma once

#include <cstdint>

#include "core/mask_policy.hpp"
#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/mla/mla_kernel_params.cuh"

namespace kvinfer::cuda {

// Keys [key_begin, key_end) of the item's chunk that its last row sees; every row
// sees those before full_end. num_tiles key tiles of kKeys cover them.
struct MlaKeys {
  detail::RequestMask mask;
  int key_begin, key_end, full_end, num_tiles;
  const std::int32_t* pages;  // the request's page ids (page slot key / page_size)
  mutable std::uint32_t seen = 0;  // the largest page id this thread used (checked_page)
  // Whether some row does not see every key of the tile of `keys` keys at key0.
  __device__ __forceinline__ bool needs_mask(int key0, int keys) const { return key0 + keys > full_end; }
  // Where the keys that token `token` sees end.
  __device__ __forceinline__ int end_for(int token) const { return min(key_end, mask.last_key(token)); }
};

template <class S>
__device__ __forceinline__ MlaKeys mla_keys(const MlaKernelParams& p, const detail::WorkItem& item,
                                            const detail::RequestInfo& r) {
  MlaKeys keys;
  keys.mask.causal = p.causal;
  keys.mask.qo_len = r.qo_len;
  keys.mask.kv_len = r.kv_len;
  const int tok_lo = int(p.num_heads.div(std::uint32_t(item.row_begin)));
  const int tok_hi = int(p.num_heads.div(std::uint32_t(item.row_end - 1)));
  keys.key_begin = item.kv_begin;
  keys.key_end = min(item.kv_end, keys.mask.last_key(tok_hi));
  keys.full_end = keys.end_for(tok_lo);
  keys.num_tiles =
      keys.key_end > keys.key_begin ? (keys.key_end - keys.key_begin + S::kKeys - 1) / S::kKeys : 0;
  keys.pages = p.pages.page_ids + item.kv_base;
  return keys;
}

// Where the keys of the lane's rows g and g + 8 of row block rb end: lim[h].
template <class S>
__device__ __forceinline__ void mla_row_key_ends(int (&lim)[2], const MlaKernelParams& p,
                                                 const detail::WorkItem& item, const MlaKeys& keys, int rb,
                                                 int g) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int token = int(p.num_heads.div(std::uint32_t(item.row_begin + rb * 16 + g + 8 * h)));
    lim[h] = keys.end_for(token);
  }
}

}  // namespace kvinfer::cuda
