// SPDX-License-Identifier: Apache-2.0
// Which keys a query row sees (SPEC §2), in one place for the planner, the CPU
// backend and the CUDA kernels: causal (bottom-right), sliding window, custom
// bit-packed mask, and the classification of (rows x keys) tiles into empty,
// partial (needs per-element masking) and full.
#pragma once

#include <cstdint>

#include "core/host_device.hpp"

namespace kvinfer::detail {

enum class TileClass : std::uint8_t { kEmpty, kPartial, kFull };

// The mask of one request. Row i of the request sits at position
// i + kv_len - qo_len in the key sequence (bottom-right alignment).
struct RequestMask {
  bool causal = false;
  int window_left = -1;                 // -1: no window
  const std::uint8_t* custom = nullptr;  // this request's packed bits (little order), or null
  std::int32_t qo_len = 0;
  std::int32_t kv_len = 0;

  // row + kv_len - qo_len, never past kv_len - 1 (the plan keeps diagonal -
  // window_left within int32 too). Summed in unsigned arithmetic, which wraps where
  // row + kv_len would pass INT32_MAX and still gives the exact result, in this
  // order: regrouped as row + (kv_len - qo_len), the CUDA tiles compile to other code,
  // and the portable prefill tile ran 3-4% slower at head_dim 64 and 256 on the H200.
  KVINFER_HD std::int32_t diagonal(std::int32_t row) const {
    return std::int32_t(std::uint32_t(row) + std::uint32_t(kv_len) - std::uint32_t(qo_len));
  }

  // Keys [first, last) that row `row` may see before the custom mask is applied.
  KVINFER_HD std::int32_t first_key(std::int32_t row) const {
    if (window_left < 0) return 0;
    const std::int32_t lo = diagonal(row) - window_left;
    return lo < 0 ? 0 : lo;
  }
  KVINFER_HD std::int32_t last_key(std::int32_t row) const {
    if (!causal) return kv_len;
    const std::int32_t hi = diagonal(row) + 1;
    return hi < 0 ? 0 : (hi > kv_len ? kv_len : hi);
  }

  KVINFER_HD bool custom_bit(std::int32_t row, std::int32_t key) const {
    const std::int64_t off = std::int64_t(row) * kv_len + key;
    return (custom[off >> 3] >> (off & 7)) & 1;
  }

  KVINFER_HD bool visible(std::int32_t row, std::int32_t key) const {
    if (key < first_key(row) || key >= last_key(row)) return false;
    return custom == nullptr || custom_bit(row, key);
  }

  // Keys [*first, *last) that every row of [row_begin, row_end) (non-empty) sees
  // before the custom mask: without one, a tile of keys inside them needs no
  // per-element masking (empty when *first >= *last). A kernel takes them once per
  // work item, where classify would redo the rows' bounds for every key tile.
  KVINFER_HD void common_keys(std::int32_t row_begin, std::int32_t row_end, std::int32_t* first,
                              std::int32_t* last) const {
    *first = first_key(row_end - 1);  // first_key and last_key are non-decreasing in the row
    *last = last_key(row_begin);
  }

  // Classifies rows [row_begin, row_end) x keys [key_begin, key_end).
  KVINFER_HD TileClass classify(std::int32_t row_begin, std::int32_t row_end, std::int32_t key_begin,
                                std::int32_t key_end) const {
    if (row_begin >= row_end || key_begin >= key_end) return TileClass::kEmpty;
    // first_key and last_key are non-decreasing in the row.
    const std::int32_t lo_first = first_key(row_begin), hi_first = first_key(row_end - 1);
    const std::int32_t lo_last = last_key(row_begin), hi_last = last_key(row_end - 1);
    if (key_begin >= hi_last || key_end <= lo_first) return TileClass::kEmpty;
    if (custom != nullptr) return TileClass::kPartial;
    if (key_begin >= hi_first && key_end <= lo_last) return TileClass::kFull;
    return TileClass::kPartial;
  }
};

}  // namespace kvinfer::detail
