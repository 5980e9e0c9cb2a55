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
