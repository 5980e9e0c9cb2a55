// SPDX-License-Identifier: Apache-2.0
// The host scheduler shared by both backends: from request lengths, shapes and a
// device profile to work items (request, KV head, query rows, KV chunk), split-KV
// merge information and the workspace layout. A pure function of its inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "plan/device_profile.hpp"

namespace kvinfer::detail {

// One unit of work: query rows [row_begin, row_end) of one request packed per KV
// head (packed row r is token r / group_size, qo head kv_head * group_size + r %
// group_size) against the request's keys [kv_begin, kv_end).
struct WorkItem {
  std::int32_t request;
  std::int32_t kv_head;
  std::int32_t row_begin, row_end;  // packed rows
  std::int32_t kv_begin, kv_end;    // key positions within the request
  std::int32_t chunk;               // index of the KV chunk within the request
  // The request's RequestInfo::kv_begin, repeated here so that a kernel can locate the
  // item's first keys before the request's entry arrives (one dependent load fewer
  // ahead of the first K/V copy).
  std::int32_t kv_base;
};
static_assert(sizeof(WorkItem) == 32);
// The request of an unused entry of the workspace's item array (past the plan's items,
// up to Schedule::max_items): a kernel launched over the array's capacity learns from
// its own entry, without reading the item count first, that it has no work.
inline constexpr std::int32_t kUnusedItem = -1;

// Per request: where it lives and how its partial states are merged.
struct RequestInfo {
  std::int32_t qo_begin;  // first row in ragged q/o
  std::int32_t qo_len;
  std::int32_t kv_begin;       // ragged: first key row; paged: first entry in kv_indptr/kv_indices
  std::int32_t kv_len;         // keys
  std::int32_t num_chunks;     // 1: items write o directly; > 1: partial states then a merge
  std::int32_t partial_begin;  // first partial row (chunk c, token t -> partial_begin + c * qo_len + t)
  std::int64_t mask_offset;    // byte offset of the packed custom mask, -1 without one
};
static_assert(sizeof(RequestInfo) == 32);

struct ScheduleInput {
  std::string_view op = "plan";  // the public name in error messages
  std::span<const std::int32_t> qo_lens;
  std::span<const std::int32_t> kv_lens;
  // Where each request's keys begin (ragged: its first key row; paged: its first
  // entry in kv_indices), into its RequestInfo and its items; empty: 0.
  std::span<const std::int32_t> kv_begin;
  std::int64_t nnz_kv = 0;  // kv_indptr[batch_size], in the unit of Capacity::max_kv
  std::int64_t num_qo_heads = 1;
  std::int64_t num_kv_heads = 1;
  std::int64_t head_dim_vo = 128;
  std::int64_t page_size = 1;  // chunks are whole pages, unless pages are longer than min_chunk_tokens
  int window_left = -1;
  std::span<const std::int32_t> position_offsets;  // per request, or empty (all 0)
  std::int32_t q_tile_rows = 64;  // packed rows per work item (chosen by the backend's kernel)
  std::int64_t fixed_split_size = -1;
  bool disable_split_kv = false;
  std::int64_t min_chunk_tokens = 256;  // splitting finer costs more in merges than it gains
  // Item warps: a kernel whose CTA may run an item's keys on up to this many warps,
  // each a slot's worth of work, merged in the CTA (the GPU's decode tile). The
  // automatic split then counts warps rather than items against the slots, and no
  // warp takes fewer than min_warp_tokens keys.
  std::int32_t max_item_warps = 1;
  std::int64_t min_warp_tokens = 256;
  // How many times over the automatic split may fill the processors' slots where
  // the requests are of similar length: a GPU runs one wave of items at the full
  // rate (more only adds merges and a thin last wave); a CPU's thread pool balances
  // several.
  std::int64_t split_waves = 4;
  std::span<const std::int64_t> mask_offsets;  // byte offset of each request's packed mask, or empty
  // Fixed-capacity mode: sizes are the worst case of the capacity, not of this batch.
  struct Capacity {
    std::int64_t max_batch;
    std::int64_t max_qo_tokens;
    std::int64_t max_kv_tokens = 0;  // bounds the chunks of a fixed split size
    std::int64_t max_qo_len = -1;    // query rows of one request (decode: 1); -1: max_qo_tokens
    std::int64_t max_kv = -1;        // bounds nnz_kv (pages or key rows, as the public Capacity); -1: none
  };
  std::optional<Capacity> capacity;
};

// A query row of a split request whose partial states are merged.
struct MergeToken {
  std::int32_t row;  // row in ragged q/o
  std::int32_t request;
};

// Byte offsets of the schedule's arrays in the int workspace and of the partial
// states in the float workspace (both 256-byte aligned).
struct WorkspaceLayout {
  std::size_t requests = 0;      // RequestInfo[max_batch]
  std::size_t items = 0;         // WorkItem[max_items]
  std::size_t merge_tokens = 0;  // MergeToken[max_merge_tokens]
  std::size_t counts = 0;        // int32[4]: num_items, num_merge_tokens, batch_size, nnz_q
  std::size_t status = 0;        // DeviceStatus: zeroed by each upload (core/device_status.hpp)
  std::size_t int_bytes = 0;
  std::size_t partial_o = 0;    // float[max_partial_rows, Hq, Dvo]
  std::size_t partial_lse = 0;  // float[max_partial_rows, Hq]
  std::size_t float_bytes = 0;
};

struct Schedule {
  std::int32_t q_tile_rows = 0;
  std::int64_t kv_chunk_tokens = 0;  // 0: no request is split
  std::vector<RequestInfo> requests;
  std::vector<WorkItem> items;
  std::vector<MergeToken> merge_tokens;  // rows whose request has num_chunks > 1
  std::int64_t partial_rows = 0;
  std::int32_t max_chunks = 1;  // the most chunks of one request (sizes the merge's CTAs)
  std::int32_t item_warps = 1;  // warps that share each item's keys (ScheduleInput::max_item_warps)
  bool fixed_split = false;     // chunks of fixed_split_size: a request's split is its own, not the batch's
  // Capacity of the arrays (>= the sizes above; equal to them without a fixed capacity).
  std::int64_t max_batch = 0;
  std::int64_t max_items = 0;
  std::int64_t max_merge_tokens = 0;
  std::int64_t max_partial_rows = 0;
  WorkspaceLayout layout;
};

// What one plan may hold. Requests and rows are int32 on the device; the bounds on
// work items and workspace bytes turn lengths or capacities far beyond any tensor a
// caller can hold (which run() would reject) into an error at plan time, before
// anything of their size is allocated or multiplied.
inline constexpr std::int64_t kMaxWorkItems = std::int64_t(1) << 22;         // a 128 MiB item array
inline constexpr std::int64_t kMaxWorkspaceBytes = std::int64_t(1) << 34;    // each workspace buffer

// Makes the schedule, in named steps (schedule.cpp): measure the requests, check the
// fixed capacity, choose the chunk and the item warps, lay out requests and items,
// size the arrays and the workspace. Throws kvinfer::Error naming in.op when a fixed
// capacity is exceeded (the one check of a plan against its capacity), and when the
// plan would exceed kMaxWorkItems or kMaxWorkspaceBytes. Expects what the wrappers
// check: lengths >= 0, heads in [1, 2^16] with num_qo_heads % num_kv_heads == 0, a
// request's packed rows (qo_len * group) within int32, 1 <= page_size <= INT32_MAX,
// capacity fields in [0, INT32_MAX].
Schedule make_schedule(const ScheduleInput& in, const DeviceProfile& profile);

// The keys a request's queries can see at all: [first, last) over all its rows
// (computed in int64: no window or length overflows).
struct KeyRange {
  std::int32_t first, last;
};
KeyRange visible_key_range(std::int32_t qo_len, std::int32_t kv_len, int window_left,
                           std::int32_t position_offset = 0);

}  // namespace kvinfer::detail
