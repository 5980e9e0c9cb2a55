// SPDX-License-Identifier: Apache-2.0
// Where the keys of a request live, for every attention kernel: key position ->
// (page, slot) through the page table, or a row of the ragged K/V tensors.
#pragma once

#include <cstdint>

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

// The pages of a KV tile's rows, looked up a tile ahead by a one-warp CTA: lane l
// holds the page of the tile's row l % kKeys. The copies of a tile then take their
// pages by shuffle instead of waiting for page-table loads, whose misses in L1 would
// otherwise stall the warp before it computes the tile already in shared memory.
template <int kKeys>
struct PagesAhead {
  std::int32_t lane_page = 0;
  // Issues the loads for the tile of rows [key0, key0 + kKeys) (rows past key_end
  // take the last key's page).
  __device__ __forceinline__ void fetch(const KeyLocator& locate, int key0, int key_end) {
    static_assert(kKeys <= 32, "one row per lane");
    if (locate.pages != nullptr) lane_page = locate.page_of(min(key0 + int(threadIdx.x % 32) % kKeys, key_end - 1));
  }
  __device__ __forceinline__ KeySlot slot(const KeyLocator& locate, int key, int row) const {
    return locate.on_page(key, __shfl_sync(0xffffffffu, lane_page, row));
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

}  // namespace kvinfer::cuda
