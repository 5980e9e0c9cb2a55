// SPDX-License-Identifier: Apache-2.0
#include "plan/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"

namespace kvinfer::detail {
namespace {

constexpr std::string_view kOp = "plan";
// Chunks per slot's share of the work for skewed lengths (one request much longer
// than the mean). Finer chunks even out better but cost merges of hundreds of
// states per row: on the H200, one slot's share per chunk measured best (decode
// 64 x 4k skewed: 0.83 of the read bandwidth at a quarter, 0.91 at about one).
constexpr std::int64_t kSkewChunksPerShare = 1;
// Automatic chunks of pages longer than min_chunk_tokens: multiples of this many keys.
constexpr std::int64_t kLargePageStep = 16;
constexpr std::size_t kAlign = 256;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

}  // namespace

KeyRange visible_key_range(std::int32_t qo_len, std::int32_t kv_len, int window_left) {
  if (qo_len == 0) return {0, 0};
  // Row 0 has the smallest window start; the last row's diagonal is kv_len - 1, so a
  // causal mask never hides a key from every row.
  const std::int32_t first = window_left >= 0 ? std::clamp(kv_len - qo_len - window_left, 0, kv_len) : 0;
  return {first, kv_len};
}

Schedule make_schedule(const ScheduleInput& in, const DeviceProfile& profile) {
  const auto batch = std::int64_t(in.qo_lens.size());
  const std::int64_t group = in.num_qo_heads / in.num_kv_heads;
  const std::int64_t tile = in.q_tile_rows;
  const std::int64_t page = std::max<std::int64_t>(1, in.page_size);

  Schedule s;
  s.q_tile_rows = in.q_tile_rows;

  std::vector<std::int64_t> tiles(batch), eff_lens(batch);
  std::vector<KeyRange> ranges(batch);
  std::int64_t nnz_q = 0, max_eff = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    ranges[b] = visible_key_range(in.qo_lens[b], in.kv_lens[b], in.window_left);
    eff_lens[b] = ranges[b].last - ranges[b].first;
    tiles[b] = ceil_div(std::int64_t(in.qo_lens[b]) * group, tile);
    nnz_q += in.qo_lens[b];
    max_eff = std::max(max_eff, eff_lens[b]);
  }

  // Capacity of the item array: the budget of concurrent items, or more when the
  // query tiles alone exceed it (then nothing is split).
  const std::int64_t budget = profile.concurrent_items();
  std::int64_t max_items = 0;
  if (in.capacity) {
    require_v(batch <= in.capacity->max_batch, kOp, "batch_size", batch,
              fmt::format("must not exceed the capacity's max_batch ({})", in.capacity->max_batch));
    require_v(nnz_q <= in.capacity->max_qo_tokens, kOp, "qo_indptr[batch_size]", nnz_q,
              fmt::format("must not exceed the capacity's max_qo_tokens ({})", in.capacity->max_qo_tokens));
    // Tiles over all requests, and the tiles of one request.
    const std::int64_t tiles_bound =
        ceil_div(in.capacity->max_qo_tokens * group, tile) + std::max<std::int64_t>(0, in.capacity->max_batch - 1);
    const std::int64_t max_qo_len = in.capacity->max_qo_len < 0 ? in.capacity->max_qo_tokens : in.capacity->max_qo_len;
    // Automatic chunks: at most split_waves * slots items per head, or, for skewed
    // lengths, the tiles plus work / chunk <= kSkewChunksPerShare * that target.
    std::int64_t per_head =
        tiles_bound + kSkewChunksPerShare * std::max<std::int64_t>(1, in.split_waves) *
                          std::max<std::int64_t>(1, budget / in.num_kv_heads);
    if (in.fixed_split_size > 0 && !in.disable_split_kv) {
      // sum_b tiles_b * chunks_b with chunks_b <= kv_b / c + 1.
      const std::int64_t c = ceil_div(in.fixed_split_size, page) * page;
      per_head = std::max(per_head, tiles_bound + ceil_div(max_qo_len * group, tile) *
                                                      ceil_div(in.capacity->max_kv_tokens, c));
    }
    max_items = in.num_kv_heads * per_head;
  }

  // KV chunk size (tokens). A fixed size is rounded up to whole pages. Automatic
  // chunks are whole pages too where a page holds at most min_chunk_tokens keys;
  // larger pages (a contiguous cache: one page per request) are cut in steps of
  // kLargePageStep keys, the kernels' key tile, as whole pages would leave such a
  // request unsplit. Without a fixed size, where the requests
  // are of similar length: the smallest chunk whose items fill every processor's
  // slots at most split_waves times over, so that long requests spread across the
  // device (counting each candidate's items, rather than dividing the work, keeps
  // the count within the waves when chunks round up per request); nothing is split
  // when the query tiles alone fill them. Where one request is more than twice as
  // long as the mean: chunks of a slot's share of the work (kSkewChunksPerShare),
  // so that the long request's items spread over the slots alongside the short
  // requests' and the hardware's dynamic assignment evens them out. No
  // chunk is smaller than min_chunk_tokens, below which merges cost more than they
  // balance.
  constexpr std::int64_t kNoSplit = std::numeric_limits<std::int32_t>::max();
  const std::int64_t unit = page <= in.min_chunk_tokens ? page : kLargePageStep;
  std::int64_t chunk = kNoSplit;
  if (in.disable_split_kv) {
    chunk = kNoSplit;
  } else if (in.fixed_split_size > 0) {
    chunk = ceil_div(in.fixed_split_size, page) * page;
  } else if (max_eff > 0) {
    const std::int64_t slots_per_head = std::max<std::int64_t>(1, budget / in.num_kv_heads);
    const std::int64_t target = std::max<std::int64_t>(1, in.split_waves) * slots_per_head;
    std::int64_t work = 0;  // keys x tiles per KV head
    for (std::int64_t b = 0; b < batch; ++b) work += tiles[b] * eff_lens[b];
    const std::int64_t share = ceil_div(work, target);
    const auto items_per_head = [&](std::int64_t c) {
      std::int64_t n = 0;
      for (std::int64_t b = 0; b < batch; ++b) n += tiles[b] * std::max<std::int64_t>(1, ceil_div(eff_lens[b], c));
      return n;
    };
    // One request much longer than the mean (skewed lengths): chunks of a slot's share
    // of the work. Otherwise the smallest chunk (in units) whose items meet the
    // target; items only fall as chunks grow, and hi covers the longest request whole.
    std::int64_t tiles_total = 0;
    for (std::int64_t b = 0; b < batch; ++b) tiles_total += tiles[b];
    const bool skewed = max_eff > 2 * ceil_div(work, std::max<std::int64_t>(1, tiles_total));
    std::int64_t lo = ceil_div(in.min_chunk_tokens, unit), hi = ceil_div(max_eff, unit);
    if (skewed) {
      chunk = ceil_div(std::max(ceil_div(share, kSkewChunksPerShare), in.min_chunk_tokens), unit) * unit;
    } else if (items_per_head(hi * unit) <= target) {
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        if (items_per_head(mid * unit) <= target) hi = mid;
        else lo = mid + 1;
      }
      chunk = std::min(lo, hi) * unit;
    }
  }
  if (chunk >= max_eff) chunk = kNoSplit;

  // Item warps (automatic split of similar lengths only: a fixed split size must not
  // depend on the batch, a fixed capacity keeps one launch shape for every re-plan,
  // and skewed lengths would give the short requests' items idle warps). A warp's
  // share of the keys is chosen as the chunk above is, counting warps: then W of
  // them form an item of W shares, the most that still fit the slots with W warps per
  // item. The merges shrink by W (none at all where an item covers a request).
  std::int32_t item_warps = 1;
  if (in.max_item_warps > 1 && !in.disable_split_kv && in.fixed_split_size <= 0 && !in.capacity && max_eff > 0) {
    std::int64_t work = 0, tiles_total = 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      work += tiles[b] * eff_lens[b];
      tiles_total += tiles[b];
    }
    const bool skewed = max_eff > 2 * ceil_div(work, std::max<std::int64_t>(1, tiles_total));
    const std::int64_t slots_per_head = std::max<std::int64_t>(1, budget / in.num_kv_heads);
    const auto items_per_head = [&](std::int64_t c) {
      std::int64_t n = 0;
      for (std::int64_t b = 0; b < batch; ++b) n += tiles[b] * std::max<std::int64_t>(1, ceil_div(eff_lens[b], c));
      return n;
    };
    // The smallest share (whole pages, at least min_warp_tokens) whose warps fit the slots.
    std::int64_t lo = ceil_div(in.min_warp_tokens, unit), hi = ceil_div(max_eff, unit);
    if (!skewed && items_per_head(hi * unit) <= slots_per_head) {
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        if (items_per_head(mid * unit) <= slots_per_head) hi = mid;
        else lo = mid + 1;
      }
      const std::int64_t share = std::min(lo, hi) * unit;
      for (std::int32_t w = in.max_item_warps; w >= 2; w /= 2) {
        const std::int64_t c = share * w >= max_eff ? kNoSplit : share * w;
        if (items_per_head(c) * w <= slots_per_head && (c == kNoSplit || c >= in.min_chunk_tokens)) {
          item_warps = w;
          chunk = c;
          break;
        }
      }
    }
  }

  // Requests, partial-state rows and merge tokens.
  s.requests.resize(batch);
  std::int64_t qo_begin = 0, partial_rows = 0;
  bool any_split = false;
  for (std::int64_t b = 0; b < batch; ++b) {
    RequestInfo& r = s.requests[b];
    r.qo_begin = std::int32_t(qo_begin);
    r.qo_len = in.qo_lens[b];
    r.kv_begin = 0;  // set_kv_begins: the caller knows ragged vs paged offsets
    r.kv_len = in.kv_lens[b];
    r.num_chunks = std::int32_t(std::max<std::int64_t>(1, ceil_div(eff_lens[b], chunk)));
    r.partial_begin = -1;
    r.mask_offset = in.mask_offsets.empty() ? -1 : in.mask_offsets[b];
    if (r.num_chunks > 1 && r.qo_len > 0) {
      any_split = true;
      s.max_chunks = std::max(s.max_chunks, r.num_chunks);
      r.partial_begin = std::int32_t(partial_rows);
      partial_rows += std::int64_t(r.num_chunks) * r.qo_len;
      for (std::int32_t t = 0; t < r.qo_len; ++t) s.merge_tokens.push_back({r.qo_begin + t, std::int32_t(b)});
    }
    qo_begin += r.qo_len;
  }
  s.kv_chunk_tokens = any_split ? chunk : 0;
  s.item_warps = item_warps;
  s.fixed_split = !in.disable_split_kv && in.fixed_split_size > 0;
  s.partial_rows = partial_rows;

  // Work items, request-major so that one request's items are adjacent.
  std::int64_t num_items = 0;
  for (std::int64_t b = 0; b < batch; ++b) num_items += tiles[b] * s.requests[b].num_chunks;
  s.items.reserve(std::size_t(num_items * in.num_kv_heads));
  for (std::int64_t b = 0; b < batch; ++b) {
    const RequestInfo& r = s.requests[b];
    const std::int64_t rows = std::int64_t(r.qo_len) * group;
    for (std::int64_t h = 0; h < in.num_kv_heads; ++h) {
      for (std::int64_t row = 0; row < rows; row += tile) {
        for (std::int32_t c = 0; c < r.num_chunks; ++c) {
          const std::int64_t kv_begin = ranges[b].first + std::int64_t(c) * (r.num_chunks > 1 ? chunk : 0);
          const std::int64_t kv_end = r.num_chunks > 1 ? std::min<std::int64_t>(kv_begin + chunk, ranges[b].last)
                                                       : ranges[b].last;
          s.items.push_back(WorkItem{std::int32_t(b), std::int32_t(h), std::int32_t(row),
                                     std::int32_t(std::min(row + tile, rows)), std::int32_t(kv_begin),
                                     std::int32_t(kv_end), c, 0});
        }
      }
    }
  }

  if (in.capacity) {
    require_v(std::int64_t(s.items.size()) <= max_items, kOp, "split.fixed_split_size", in.fixed_split_size,
              fmt::format("makes {} work items, more than the capacity's {}; use a larger split size",
                          s.items.size(), max_items));
    s.max_batch = in.capacity->max_batch;
    s.max_items = max_items;
    s.max_merge_tokens = in.capacity->max_qo_tokens;
    s.max_partial_rows = ceil_div(max_items, in.num_kv_heads) * ceil_div(tile, group);
  } else {
    s.max_batch = batch;
    s.max_items = std::int64_t(s.items.size());
    s.max_merge_tokens = std::int64_t(s.merge_tokens.size());
    s.max_partial_rows = partial_rows;
  }

  WorkspaceLayout& l = s.layout;
  std::size_t off = 0;
  l.requests = off;
  off = align_up(off + std::size_t(s.max_batch) * sizeof(RequestInfo));
  l.items = off;
  off = align_up(off + std::size_t(s.max_items) * sizeof(WorkItem));
  l.merge_tokens = off;
  off = align_up(off + std::size_t(s.max_merge_tokens) * sizeof(MergeToken));
  l.counts = off;
  off = align_up(off + 4 * sizeof(std::int32_t));
  l.int_bytes = off;
  l.partial_o = 0;
  const std::size_t partial_states = std::size_t(s.max_partial_rows) * std::size_t(in.num_qo_heads);
  l.partial_lse = align_up(partial_states * std::size_t(in.head_dim_vo) * sizeof(float));
  l.float_bytes = align_up(l.partial_lse + partial_states * sizeof(float));
  return s;
}

void set_kv_begins(Schedule& s, std::span<const std::int32_t> kv_begin) {
  for (std::size_t b = 0; b < s.requests.size(); ++b) s.requests[b].kv_begin = kv_begin[b];
  for (WorkItem& it : s.items) it.kv_base = kv_begin[std::size_t(it.request)];
}

}  // namespace kvinfer::detail
