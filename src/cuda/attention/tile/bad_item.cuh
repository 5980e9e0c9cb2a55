// SPDX-License-Identifier: Apache-2.0
// Work items whose page table holds an id outside the cache (builds with
// KVINFER_DEVICE_INDEX_CHECKS). Every attention kernel that reads page ids asks, once
// per work item and before its first copy, whether any id of the item's keys
// [kv_begin, kv_end) is out of range (item_page_missing: one coalesced pass over the
// item's share of kv_indices, whose loads leave beside the first pages' look-ahead;
// any_bad_page: the CTA's vote). Such an item runs no key tile: its rows become zeros
// with LSE -inf, all of its heads, or, for a chunk of a split request, its partial LSE
// becomes kBadChunkLse, which the merge turns into such a row; the first bad entry goes
// to the device status (record_bad_item, mark_bad_chunk). The main loops use the ids as
// they load them, unchanged: a check at each use (a clamp or a select) lengthened the
// key-row tile's per-tile address chain and cost it up to 1.3x its time
// (docs/log/device-index-checks-2026-12-02.md).
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

// The first bad entry of the item's pages to the device status (thread 0).
__device__ __forceinline__ void record_bad_item(const AttentionKernelParams& p, const detail::WorkItem& item) {
  if (threadIdx.x != 0) return;
  const PageLookup& pages = p.kv.pages;
  const ItemPageEntries e = item_page_entries(pages, item);
  record_bad_pages_inline(p.schedule.status, pages.page_ids, e.first, e.last, pages.num_pages, item.request);
}

// Whether any thread of the CTA found one, agreed by every thread (a barrier of the
// CTA; of the warp for a one-warp CTA), as a value ptxas treats as uniform: the vote's
// own result is a per-thread predicate to it, and a tile count derived from that took
// the key-row tile's main loop off the uniform datapath (15 uniform instructions in it
// down to 4, convergence barriers added: 1.35x its time). Read back from shared memory
// at one address, it is uniform again (the round trip runs for ragged KV too, whose
// vote is false: a branch around it made the result per-thread again). Thread 0
// records the first bad entry (record_bad_item). `scratch`: 4 bytes of the CTA's
// shared memory, free until the barrier after the read.
template <bool kOneWarpCta>
__device__ __forceinline__ bool any_bad_page(const AttentionKernelParams& p, const detail::WorkItem& item, bool missing,
                                             void* scratch) {
  const auto sync = [] {
    if constexpr (kOneWarpCta) {
      __syncwarp();
    } else {
      __syncthreads();
    }
  };
  bool bad = false;
  if (p.kv.paged()) {
    if constexpr (kOneWarpCta) {
      bad = __any_sync(0xffffffffu, missing);
    } else {
      bad = __syncthreads_or(missing);
    }
  }
  auto* flag = static_cast<int*>(scratch);
  if (threadIdx.x == 0) *flag = bad;
  if (bad) record_bad_item(p, item);
  sync();
  const bool uniform = *static_cast<volatile int*>(flag) != 0;
  sync();  // every thread has read it before the copies reuse the bytes
  return uniform;
}

// What an item with a bad page id does instead of discarding rows: the kernel runs
// it with no key tile (its tile count 0, so nothing is copied through the page
// table), which its epilogue already writes as zeros with LSE -inf. Around that, in
// this order, every thread of the CTA:
//   - record_bad_item, right after the vote: the first bad entry to the device status;
//   - mark_bad_chunk, after the epilogue: for a chunk of a split request, its partial
//     LSE becomes kBadChunkLse, which the merge turns into a zero row (an empty
//     chunk's -inf would leave the other chunks' values).
// Written as data and branches that every thread takes alike, inlined, with nothing of
// the record's kept across the main loop: an early return, a call, or the record after
// the loop each made ptxas compile the key-row tile's unchanged main loop with more
// instructions (up to 906 against 801).
template <bool kOneWarpCta>
__device__ __forceinline__ void mark_bad_chunk(const AttentionKernelParams& p, const detail::WorkItem& item,
                                               const detail::RequestInfo& r, int rows) {
  if (r.num_chunks <= 1) return;
  if constexpr (kOneWarpCta) {
    __syncwarp();
  } else {
    __syncthreads();  // the epilogue's partial LSEs are written before these
  }
  for (int i = int(threadIdx.x); i < rows; i += int(blockDim.x)) {
    const PackedRow row = packed_row(p, item, p.heads.group_size, i);
    const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + row.token;
    p.schedule.partial_lse[prow * p.heads.num_qo_heads + row.head] = kBadChunkLse;
  }
}

// mark_bad_chunk's writes for a kernel whose threads are not all left at the end (the
// warp-specialised prefill's consumers, the producer having returned): thread `thread`
// of `threads`, after a barrier of those threads. (mark_bad_chunk keeps its own loop:
// calling this from it changed the wgmma mainloop's code in the checked build.)
__device__ __forceinline__ void write_bad_chunk_lse(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                    const detail::RequestInfo& r, int rows, int thread, int threads) {
  for (int i = thread; i < rows; i += threads) {
    const PackedRow row = packed_row(p, item, p.heads.group_size, i);
    const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + row.token;
    p.schedule.partial_lse[prow * p.heads.num_qo_heads + row.head] = kBadChunkLse;
  }
}

}  // namespace kvinfer::cuda
