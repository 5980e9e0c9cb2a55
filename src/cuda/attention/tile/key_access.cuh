// SPDX-License-Identifier: Apache-2.0
// Where the keys of a request live, for every attention kernel: key position ->
// (page, slot) through the page table, or a row of the ragged K/V tensors.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/common/fast_divmod.cuh"

namespace kvinfer::cuda {

// Where key row j of the item's request lives: (page, slot) through the page
// table (looked up once for K and V), or (0, j) for ragged KV.
struct KeySlot {
  std::int64_t page;
  std::int64_t slot;
};
struct KeyLocator {
  const std::int32_t* pages;  // null: ragged
  FastDivmod page_size;
  __device__ __forceinline__ KeySlot operator()(std::int32_t j) const {
    if (pages == nullptr) return {0, j};
    std::uint32_t slot;
    const std::uint32_t page_slot = page_size.divmod(std::uint32_t(j), &slot);
    return {__ldg(pages + page_slot), std::int64_t(slot)};
  }
  // The page holding key row j (paged only): the load of operator(), for a caller
  // that issues it ahead of the copies that need it.
  __device__ __forceinline__ std::int32_t page_of(std::int32_t j) const {
    return __ldg(pages + page_size.div(std::uint32_t(j)));
  }
  // Key row j on its page, looked up before with page_of.
  __device__ __forceinline__ KeySlot on_page(std::int32_t j, std::int32_t page) const {
    std::uint32_t slot;
    page_size.divmod(std::uint32_t(j), &slot);
    return {page, std::int64_t(slot)};
  }
};

// The pages of a one-warp CTA's KV tiles, looked up ahead of the copies, which then
// take them by shuffle instead of waiting for page-table loads (whose misses would
// stall the warp before it computes the tile already in shared memory). The warp's
// tiles start `step` keys apart (kKeys, or more where item warps take turns). The CTA
// calls start() for its first tile, then fetch() for each later tile in order, each
// before that tile's copies and after the previous tile's.
//
// Window mode, where every tile lies on one page (pages of a multiple of kKeys keys,
// the first tile starting on a key multiple of kKeys: decode at page 16 or 64): lane
// l holds the page of tile w + l of the current window of 32 tiles and of tile w + 32
// + l of the next, loaded a whole window before its tiles are copied, so no copy
// waits for the page table (on the H200 the copies' shuffle otherwise waited on it in
// 5% of the decode tile's stall samples). Row mode, for tiles that may cross pages:
// lane l holds the page of row l % kKeys of the tile, loaded one or two tiles ahead.
template <int kKeys>
struct PagesAhead {
  static constexpr int kWindow = 32;  // tiles per window: one per lane
  std::int32_t lane_page = 0;  // row mode: row lane % kKeys; window mode: tile window_tile0 + lane
  std::int32_t next_page = 0;  // window mode: the next window's tile
  int window_key0 = -1;        // the window's first key (window mode), or -1 (row mode)
  int window_step = 0;         // window mode: keys between the warp's tiles
  int in_window = 0;           // window mode: the tile last fetched, within the window

  __device__ __forceinline__ void start(const KeyLocator& locate, int key_begin, int step, int key_end) {
    if (locate.pages == nullptr) return;
    const int lane = int(threadIdx.x % 32);
    if (locate.page_size.divisor % kKeys == 0 && key_begin % kKeys == 0) {
      window_key0 = key_begin;
      window_step = step;
      in_window = 0;
      lane_page = locate.page_of(min(key_begin + lane * step, key_end - 1));
      next_page = locate.page_of(min(key_begin + (kWindow + lane) * step, key_end - 1));
    } else {
      window_key0 = -1;
      lane_page = locate.page_of(min(key_begin + lane % kKeys, key_end - 1));
    }
  }
  // The warp's next tile, rows [key0, key0 + kKeys) (rows past key_end take the last
  // key's page).
  __device__ __forceinline__ void fetch(const KeyLocator& locate, int key0, int key_end) {
    static_assert(kKeys <= 32, "one row per lane");
    if (locate.pages == nullptr) return;
    const int lane = int(threadIdx.x % 32);
    if (window_key0 >= 0) {
      if (++in_window == kWindow) {  // the next window's first tile
        in_window = 0;
        lane_page = next_page;
        window_key0 += kWindow * window_step;
        next_page = locate.page_of(min(window_key0 + (kWindow + lane) * window_step, key_end - 1));
      }
    } else {
      lane_page = locate.page_of(min(key0 + lane % kKeys, key_end - 1));
    }
  }
  // Row mode: key row `key`, row `row` of the tile last fetched.
  __device__ __forceinline__ KeySlot slot(const KeyLocator& locate, int key, int row) const {
    return locate.on_page(key, __shfl_sync(0xffffffffu, lane_page, row));
  }
  // The page of the tile last fetched, where its rows lie on one page.
  __device__ __forceinline__ std::int32_t tile_page() const {
    return __shfl_sync(0xffffffffu, lane_page, window_key0 >= 0 ? in_window : 0);
  }
};

// Key row address of one of K / V for the item's KV head.
struct KeyRow {
  const char* base;
  std::int64_t stride_page, stride_token;  // bytes
  __device__ __forceinline__ const char* operator()(KeySlot s) const {
    return base + s.page * stride_page + s.slot * stride_token;
  }
};

// The item's key locator: its request's page ids (paged; kv_base is the request's first
// entry of kv_indices) or none (ragged).
__device__ __forceinline__ KeyLocator item_locator(const AttentionKernelParams& p, const detail::WorkItem& item) {
  return {p.kv.paged() ? p.kv.pages.page_ids + item.kv_base : nullptr, p.kv.pages.page_size};
}

// The rows of the item's KV head in K and in V: the paged cache's, addressed by
// (page, slot), or the ragged tensors' from the request's first key (kv_base, slot =
// key). elem: bytes per element (the strides count elements); offset: elements into
// every row.
struct ItemRows {
  KeyRow k, v;
};
__device__ __forceinline__ ItemRows item_rows(const AttentionKernelParams& p, const detail::WorkItem& item,
                                              std::int64_t elem, std::int64_t offset = 0) {
  const std::int64_t first = p.kv.paged() ? 0 : std::int64_t(item.kv_base);
  return {{static_cast<const char*>(p.kv.k.data) +
               (item.kv_head * p.kv.k.stride_head + first * p.kv.k.stride_token + offset) * elem,
           p.kv.k.stride_page * elem, p.kv.k.stride_token * elem},
          {static_cast<const char*>(p.kv.v.data) +
               (item.kv_head * p.kv.v.stride_head + first * p.kv.v.stride_token + offset) * elem,
           p.kv.v.stride_page * elem, p.kv.v.stride_token * elem}};
}

}  // namespace kvinfer::cuda
