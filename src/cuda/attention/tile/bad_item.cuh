// SPDX-License-Identifier: Apache-2.0
// Work items whose page table holds an id outside the cache. Every attention kernel
// that reads page ids asks, once per work item and before its first copy, whether
// any id of the item's keys [kv_begin, kv_end) is out of range (item_has_bad_page):
// one coalesced pass over the item's share of kv_indices, whose loads leave beside
// the first pages' look-ahead and which warms L1 for it. Such an item copies nothing:
// its rows become zeros with LSE -inf, all of its heads, or, for a chunk of a split
// request, its partial LSE becomes kBadChunkLse, which the merge turns into such a
// row; the first bad entry goes to the device status (discard_bad_item). The main
// loops then use the ids as they load them, unchanged: a check at each use (a clamp
// or a select) lengthened the key-row tile's per-tile address chain and cost it up
// to 1.3x its time (docs/log/device-index-checks-2026-12-02.md).
//
// The ids are read twice, here and in the loop: the page table must not change while
// a kernel that reads it runs (a race with the caller's own writes in any case).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/common/device_status.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

using detail::kDeviceIndexChecks;  // whether the kernels call what follows

// Entries [first, last) of kv_indices that hold the pages of the item's keys.
struct ItemPageEntries {
  std::int64_t first = 0, last = 0;
};
__device__ __forceinline__ ItemPageEntries item_page_entries(const PageLookup& pages, const detail::WorkItem& item) {
  if (item.kv_end <= item.kv_begin) return {};
  return {item.kv_base + pages.page_size.div(std::uint32_t(item.kv_begin)),
          item.kv_base + pages.page_size.div(std::uint32_t(item.kv_end - 1)) + 1};
}

// Whether any of this thread's share of the item's page ids (every `threads`-th from
// its index in the CTA) is outside the cache. Ragged KV: false. A kernel computes it
// before loads of its own (q, the first pages) and agrees on it after them
// (any_bad_page), so that the two latencies overlap.
__device__ __forceinline__ bool item_page_missing(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                  int threads) {
  if (!p.kv.paged()) return false;
  const PageLookup& pages = p.kv.pages;
  const ItemPageEntries e = item_page_entries(pages, item);
  bool bad = false;
#pragma unroll 4
  for (std::int64_t i = e.first + int(threadIdx.x); i < e.last; i += threads)
    bad |= std::uint32_t(__ldg(pages.page_ids + i)) >= pages.num_pages;
  return bad;
}

// Whether any thread of the CTA found one: a barrier of the CTA (of the warp for a
// one-warp CTA), skipped for ragged KV (the same for every thread).
template <bool kOneWarpCta>
__device__ __forceinline__ bool any_bad_page(const AttentionKernelParams& p, bool missing) {
  if (!p.kv.paged()) return false;
  if constexpr (kOneWarpCta) {
    return __any_sync(0xffffffffu, missing);
  } else {
    return __syncthreads_or(missing);
  }
}

// The item's rows as zeros with LSE -inf (a split chunk: its partial LSE
// kBadChunkLse) and the first bad entry recorded; every thread of the CTA calls it.
// Out of line: it runs only for bad input, and inlined it changed the register
// allocation of the kernels around it.
// The rows are the problem's (p.dims.vo: the padded tile's instance may be wider).
__device__ __noinline__ inline void discard_bad_item(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                 const detail::RequestInfo& r, int rows) {
  const PageLookup& pages = p.kv.pages;
  if (threadIdx.x == 0) {
    const ItemPageEntries e = item_page_entries(pages, item);
    record_bad_pages(p.schedule.status, pages.page_ids, e.first, e.last, pages.num_pages, item.request);
  }
  const int chunks = p.dims.vo / 8;  // 16-byte chunks of a 16-bit output row
  const int group = p.heads.group_size;
  for (int i = int(threadIdx.x); i < rows * chunks; i += int(blockDim.x)) {
    const PackedRow row = packed_row(p, item, group, i / chunks);
    if (r.num_chunks > 1) {
      const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + row.token;
      if (i % chunks == 0) p.schedule.partial_lse[prow * p.heads.num_qo_heads + row.head] = kBadChunkLse;
      continue;
    }
    const std::int64_t orow = r.qo_begin + row.token;
    ptx::st_v4(output_row(p.out, orow, row.head) + (i % chunks) * 8, make_uint4(0, 0, 0, 0));
    if (p.out.lse != nullptr && i % chunks == 0)
      p.out.lse[orow * p.out.lse_stride_n + row.head * p.out.lse_stride_h] = -INFINITY;
  }
}

}  // namespace kvinfer::cuda
