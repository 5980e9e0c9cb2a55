// SPDX-License-Identifier: Apache-2.0
#include "plan/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/check.hpp"
#include "core/device_status.hpp"

namespace kvinfer::detail {
namespace {

// Chunks per slot's share of the work for skewed lengths (one request much longer
// than the mean). Finer chunks even out better but cost merges of hundreds of
// states per row: on the H200, one slot's share per chunk measured best (decode
// 64 x 4k skewed: 0.83 of the read bandwidth at a quarter, 0.91 at about one).
constexpr std::int64_t kSkewChunksPerShare = 1;
// Automatic chunks of pages longer than min_chunk_tokens: multiples of this many keys.
constexpr std::int64_t kLargePageStep = 16;
constexpr std::size_t kAlign = 256;

// a, b >= 0 (b > 0); never overflows, unlike (a + b - 1) / b.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return a / b + (a % b != 0);
}

std::size_t align_up(std::size_t x) {
  return (x + kAlign - 1) / kAlign * kAlign;
}

// a * b, or INT64_MAX where it overflows (a, b >= 0): compared against a bound.
std::int64_t mul_sat(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<std::int64_t>::max() : r;
}
std::int64_t add_sat(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<std::int64_t>::max() : r;
}

// The bound on a plan's work items (kMaxWorkItems), with what made them.
void check_items(const ScheduleInput& in, std::int64_t items, std::string_view what) {
  if (items <= kMaxWorkItems) return;
  fail(in.op, "work items", items == std::numeric_limits<std::int64_t>::max() ? std::string("> 2^63") : std::to_string(items),
       fmt::format("a plan holds at most {} work items ({}); the lengths or capacity are far beyond what a "
                   "tensor can hold, or the split size is too small",
                   kMaxWorkItems, what));
}

}  // namespace

KeyRange visible_key_range(std::int32_t qo_len, std::int32_t kv_len, int window_left,
                           std::int32_t position_offset) {
  if (qo_len == 0) return {0, 0};
  // Row 0 has the smallest window start. Keys past the last row's diagonal (kv_len - 1
  // + position_offset) stay in the range where a causal mask hides them from every
  // row: the kernels mask them, and rows that see no key come out as zeros.
  const std::int64_t lo = std::int64_t(kv_len) - qo_len + position_offset - window_left;
  const std::int32_t first = window_left >= 0 ? std::int32_t(std::clamp<std::int64_t>(lo, 0, kv_len)) : 0;
  return {first, kv_len};
}

namespace {

// What the steps below need of each request: its query tiles per KV head and the
// keys its rows can see, and their sums.
struct RequestShapes {
  std::vector<std::int64_t> tiles, eff_lens;
  std::vector<KeyRange> ranges;
  std::int64_t nnz_q = 0, max_eff = 0;
  std::int64_t work = 0;         // keys x tiles per KV head
  std::int64_t tiles_total = 0;  // per KV head

  // Items per KV head with chunks of c keys.
  std::int64_t items_per_head(std::int64_t c) const {
    std::int64_t n = 0;
    for (std::size_t b = 0; b < tiles.size(); ++b)
      n += tiles[b] * std::max<std::int64_t>(1, ceil_div(eff_lens[b], c));
    return n;
  }
  // One request much longer than the mean.
  bool skewed() const { return max_eff > 2 * ceil_div(work, std::max<std::int64_t>(1, tiles_total)); }
};

constexpr std::int64_t kNoSplit = std::numeric_limits<std::int32_t>::max();

RequestShapes measure_requests(const ScheduleInput& in) {
  const auto batch = std::size_t(in.qo_lens.size());
  const std::int64_t group = in.num_qo_heads / in.num_kv_heads;
  RequestShapes r;
  r.tiles.resize(batch);
  r.eff_lens.resize(batch);
  r.ranges.resize(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    r.tiles[b] = ceil_div(std::int64_t(in.qo_lens[b]) * group, in.q_tile_rows);  // < 2^31 each
    r.tiles_total += r.tiles[b];
  }
  // Every tile is an item of each KV head: bounded before anything is multiplied by it.
  check_items(in, mul_sat(r.tiles_total, in.num_kv_heads), "query tiles x KV heads");
  for (std::size_t b = 0; b < batch; ++b) {
    r.ranges[b] = visible_key_range(in.qo_lens[b], in.kv_lens[b], in.window_left,
                                    in.position_offsets.empty() ? 0 : in.position_offsets[b]);
    r.eff_lens[b] = r.ranges[b].last - r.ranges[b].first;
    r.nnz_q += in.qo_lens[b];
    r.max_eff = std::max(r.max_eff, r.eff_lens[b]);
    r.work += r.tiles[b] * r.eff_lens[b];  // <= 2^22 x 2^31 in all
  }
  return r;
}

// The one check of a plan against its fixed capacity (CUDA-graph mode), and the
// capacity of the item array: the budget of concurrent items, or more when the
// query tiles alone exceed it (then nothing is split).
std::int64_t check_capacity_and_size_items(const ScheduleInput& in, const RequestShapes& r,
                                           std::int64_t budget) {
  const ScheduleInput::Capacity& cap = *in.capacity;
  const auto batch = std::int64_t(in.qo_lens.size());
  const std::int64_t group = in.num_qo_heads / in.num_kv_heads;
  const std::int64_t tile = in.q_tile_rows;
  require_v(batch <= cap.max_batch, in.op, "batch_size", batch,
            fmt::format("must not exceed the capacity's max_batch ({})", cap.max_batch));
  require_v(r.nnz_q <= cap.max_qo_tokens, in.op, "qo_indptr[batch_size]", r.nnz_q,
            fmt::format("must not exceed the capacity's max_qo_tokens ({})", cap.max_qo_tokens));
  if (cap.max_kv >= 0) {
    require_v(in.nnz_kv <= cap.max_kv, in.op, "kv_indptr[batch_size]", in.nnz_kv,
              fmt::format("must not exceed the capacity's max_kv ({})", cap.max_kv));
  }
  // Tiles over all requests, and the tiles of one request (capacity fields < 2^31,
  // group <= 2^16: no product here overflows).
  const std::int64_t tiles_bound =
      ceil_div(cap.max_qo_tokens * group, tile) + std::max<std::int64_t>(0, cap.max_batch - 1);
  const std::int64_t max_qo_len = cap.max_qo_len < 0 ? cap.max_qo_tokens : cap.max_qo_len;
  // Without a split every tile is one item. Automatic chunks: at most split_waves *
  // slots items per head, or, for skewed lengths, the tiles plus work / chunk <=
  // kSkewChunksPerShare * that target.
  std::int64_t per_head = tiles_bound;
  if (!in.disable_split_kv) {
    per_head = add_sat(tiles_bound, kSkewChunksPerShare * std::max<std::int64_t>(1, in.split_waves) *
                                        std::max<std::int64_t>(1, budget / in.num_kv_heads));
  }
  if (in.fixed_split_size > 0 && !in.disable_split_kv) {
    // sum_b tiles_b * chunks_b with chunks_b <= kv_b / c + 1.
    const std::int64_t page = std::max<std::int64_t>(1, in.page_size);
    const std::int64_t c = ceil_div(std::min(in.fixed_split_size, kNoSplit), page) * page;
    per_head = std::max(per_head, add_sat(tiles_bound, mul_sat(ceil_div(max_qo_len * group, tile),
                                                               ceil_div(cap.max_kv_tokens, c))));
  }
  const std::int64_t items = mul_sat(in.num_kv_heads, per_head);
  check_items(in, items, "the capacity's worst case");
  return items;
}

// The keys a chunk can hold, whole multiples of this unit: a page where a page holds
// at most min_chunk_tokens keys; larger pages (a contiguous cache: one page per
// request) are cut in steps of kLargePageStep keys, the kernels' key tile, as whole
// pages would leave such a request unsplit.
std::int64_t chunk_unit(const ScheduleInput& in) {
  const std::int64_t page = std::max<std::int64_t>(1, in.page_size);
  return page <= in.min_chunk_tokens ? page : kLargePageStep;
}

// KV chunk size (tokens). A fixed size is rounded up to whole pages. Without one,
// where the requests are of similar length: the smallest chunk whose items fill
// every processor's slots at most split_waves times over, so that long requests
// spread across the device (counting each candidate's items, rather than dividing
// the work, keeps the count within the waves when chunks round up per request);
// nothing is split when the query tiles alone fill them. Where one request is more
// than twice as long as the mean: chunks of a slot's share of the work
// (kSkewChunksPerShare), so that the long request's items spread over the slots
// alongside the short requests' and the hardware's dynamic assignment evens them
// out. No chunk is smaller than min_chunk_tokens, below which merges cost more than
// they balance.
std::int64_t choose_chunk(const ScheduleInput& in, const RequestShapes& r, std::int64_t budget) {
  const std::int64_t page = std::max<std::int64_t>(1, in.page_size);
  const std::int64_t unit = chunk_unit(in);
  std::int64_t chunk = kNoSplit;
  if (in.disable_split_kv) {
    chunk = kNoSplit;
  } else if (in.fixed_split_size > 0) {
    // A size beyond any request's keys splits nothing (and is not rounded into overflow).
    chunk = ceil_div(std::min(in.fixed_split_size, kNoSplit), page) * page;
  } else if (r.max_eff > 0) {
    const std::int64_t slots_per_head = std::max<std::int64_t>(1, budget / in.num_kv_heads);
    const std::int64_t target = std::max<std::int64_t>(1, in.split_waves) * slots_per_head;
    const std::int64_t share = ceil_div(r.work, target);
    // Otherwise the smallest chunk (in units) whose items meet the target; items only
    // fall as chunks grow, and hi covers the longest request whole.
    std::int64_t lo = ceil_div(in.min_chunk_tokens, unit), hi = ceil_div(r.max_eff, unit);
    if (r.skewed()) {
      chunk = ceil_div(std::max(ceil_div(share, kSkewChunksPerShare), in.min_chunk_tokens), unit) * unit;
    } else if (r.items_per_head(hi * unit) <= target) {
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        if (r.items_per_head(mid * unit) <= target)
          hi = mid;
        else
          lo = mid + 1;
      }
      chunk = std::min(lo, hi) * unit;
    }
  }
  return chunk >= r.max_eff ? kNoSplit : chunk;
}

// Item warps (automatic split of similar lengths only: a fixed split size must not
// depend on the batch, a fixed capacity keeps one launch shape for every re-plan,
// and skewed lengths would give the short requests' items idle warps). A warp's
// share of the keys is chosen as the chunk is, counting warps: then W of them form
// an item of W shares, the most that still fit the slots with W warps per item. The
// merges shrink by W (none at all where an item covers a request). Returns the
// warps per item and updates the chunk.
std::int32_t choose_item_warps(const ScheduleInput& in, const RequestShapes& r, std::int64_t budget,
                               std::int64_t& chunk) {
  if (in.max_item_warps <= 1 || in.disable_split_kv || in.fixed_split_size > 0 || in.capacity ||
      r.max_eff <= 0 || r.skewed()) {
    return 1;
  }
  const std::int64_t unit = chunk_unit(in);
  const std::int64_t slots_per_head = std::max<std::int64_t>(1, budget / in.num_kv_heads);
  // The smallest share (whole pages, at least min_warp_tokens) whose warps fit the slots.
  std::int64_t lo = ceil_div(in.min_warp_tokens, unit), hi = ceil_div(r.max_eff, unit);
  if (r.items_per_head(hi * unit) > slots_per_head) return 1;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (r.items_per_head(mid * unit) <= slots_per_head)
      hi = mid;
    else
      lo = mid + 1;
  }
  const std::int64_t share = std::min(lo, hi) * unit;
  for (std::int32_t w = in.max_item_warps; w >= 2; w /= 2) {
    const std::int64_t c = share * w >= r.max_eff ? kNoSplit : share * w;
    if (r.items_per_head(c) * w <= slots_per_head && (c == kNoSplit || c >= in.min_chunk_tokens)) {
      chunk = c;
      return w;
    }
  }
  return 1;
}

// Requests, partial-state rows and merge tokens.
void lay_out_requests(const ScheduleInput& in, const RequestShapes& r, std::int64_t chunk, Schedule& s) {
  const auto batch = std::size_t(in.qo_lens.size());
  s.requests.resize(batch);
  std::int64_t qo_begin = 0;
  bool any_split = false;
  std::int64_t partial_rows = 0, items = 0;
  for (std::size_t b = 0; b < batch; ++b) {
    const std::int64_t chunks = std::max<std::int64_t>(1, ceil_div(r.eff_lens[b], chunk));
    items = add_sat(items, mul_sat(r.tiles[b], chunks));
    if (chunks > 1) partial_rows = add_sat(partial_rows, mul_sat(chunks, in.qo_lens[b]));
  }
  check_items(in, mul_sat(items, in.num_kv_heads), "query tiles x KV chunks x KV heads");
  // Partial rows are int32 on the device (RequestInfo::partial_begin).
  require_v(partial_rows <= std::numeric_limits<std::int32_t>::max(), in.op, "split.fixed_split_size",
            in.fixed_split_size,
            fmt::format("splits the requests into {} partial rows, more than 2^31 - 1; use a larger split size",
                        partial_rows));
  for (std::size_t b = 0; b < batch; ++b) {
    RequestInfo& q = s.requests[b];
    q.qo_begin = std::int32_t(qo_begin);
    q.qo_len = in.qo_lens[b];
    q.kv_begin = in.kv_begin.empty() ? 0 : in.kv_begin[b];
    q.kv_len = in.kv_lens[b];
    q.num_chunks = std::int32_t(std::max<std::int64_t>(1, ceil_div(r.eff_lens[b], chunk)));
    q.partial_begin = -1;
    q.mask_offset = in.mask_offsets.empty() ? -1 : in.mask_offsets[b];
    if (q.num_chunks > 1 && q.qo_len > 0) {
      any_split = true;
      s.max_chunks = std::max(s.max_chunks, q.num_chunks);
      q.partial_begin = std::int32_t(s.partial_rows);
      s.partial_rows += std::int64_t(q.num_chunks) * q.qo_len;
      for (std::int32_t t = 0; t < q.qo_len; ++t) s.merge_tokens.push_back({q.qo_begin + t, std::int32_t(b)});
    }
    qo_begin += q.qo_len;
  }
  s.kv_chunk_tokens = any_split ? chunk : 0;
}

// Work items, request-major so that one request's items are adjacent.
void make_items(const ScheduleInput& in, const RequestShapes& r, std::int64_t chunk, Schedule& s) {
  const std::int64_t group = in.num_qo_heads / in.num_kv_heads;
  const std::int64_t tile = in.q_tile_rows;
  std::int64_t num_items = 0;
  for (std::size_t b = 0; b < s.requests.size(); ++b) num_items += r.tiles[b] * s.requests[b].num_chunks;
  check_items(in, mul_sat(num_items, in.num_kv_heads), "query tiles x KV chunks x KV heads");
  s.items.reserve(std::size_t(num_items * in.num_kv_heads));
  for (std::size_t b = 0; b < s.requests.size(); ++b) {
    const RequestInfo& q = s.requests[b];
    const std::int64_t rows = std::int64_t(q.qo_len) * group;
    for (std::int64_t h = 0; h < in.num_kv_heads; ++h) {
      for (std::int64_t row = 0; row < rows; row += tile) {
        for (std::int32_t c = 0; c < q.num_chunks; ++c) {
          const std::int64_t kv_begin = r.ranges[b].first + std::int64_t(c) * (q.num_chunks > 1 ? chunk : 0);
          const std::int64_t kv_end = q.num_chunks > 1
                                          ? std::min<std::int64_t>(kv_begin + chunk, r.ranges[b].last)
                                          : r.ranges[b].last;
          s.items.push_back(WorkItem{std::int32_t(b), std::int32_t(h), std::int32_t(row),
                                     std::int32_t(std::min(row + tile, rows)), std::int32_t(kv_begin),
                                     std::int32_t(kv_end), c, q.kv_begin});
        }
      }
    }
  }
}

// Capacities of the arrays: the capacity's worst case, or this plan's sizes.
void size_arrays(const ScheduleInput& in, std::int64_t max_items, Schedule& s) {
  if (in.capacity) {
    require_v(std::int64_t(s.items.size()) <= max_items, in.op, "split.fixed_split_size", in.fixed_split_size,
              fmt::format("makes {} work items, more than the capacity's {}; use a larger split size",
                          s.items.size(), max_items));
    const std::int64_t group = in.num_qo_heads / in.num_kv_heads;
    s.max_batch = in.capacity->max_batch;
    s.max_items = max_items;
    s.max_merge_tokens = in.capacity->max_qo_tokens;
    // Each item of a head writes at most a tile's tokens of partial rows; none
    // without a split, whatever the capacity.
    s.max_partial_rows =
        in.disable_split_kv ? 0 : ceil_div(max_items, in.num_kv_heads) * ceil_div(in.q_tile_rows, group);
  } else {
    s.max_batch = std::int64_t(s.requests.size());
    s.max_items = std::int64_t(s.items.size());
    s.max_merge_tokens = std::int64_t(s.merge_tokens.size());
    s.max_partial_rows = s.partial_rows;
  }
}

// Byte offsets of the arrays in the int workspace and of the partial states in the
// float workspace.
void lay_out_workspace(const ScheduleInput& in, Schedule& s) {
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
  l.status = off;
  off = align_up(off + sizeof(DeviceStatus));
  l.int_bytes = off;
  l.partial_o = 0;
  // Partial rows <= 2^28 (items x tile rows), heads <= 2^16, dims <= 2^9: checked
  // against the bound before any of these sizes is allocated.
  const std::int64_t partial_states = mul_sat(s.max_partial_rows, in.num_qo_heads);
  const std::int64_t float_bytes =
      add_sat(mul_sat(partial_states, mul_sat(in.head_dim_vo, std::int64_t(sizeof(float)))),
              mul_sat(partial_states, std::int64_t(sizeof(float))));
  for (auto [name, bytes] : {std::pair{"float workspace", float_bytes}, std::pair{"int workspace", std::int64_t(off)}}) {
    if (bytes > kMaxWorkspaceBytes) {
      fail(in.op, name, fmt::format("{} bytes", bytes),
           fmt::format("a plan's workspace holds at most {} bytes; the lengths or capacity are far beyond what "
                       "a tensor can hold, or the split size is too small (disable_split_kv needs no float "
                       "workspace)",
                       kMaxWorkspaceBytes));
    }
  }
  l.partial_lse = align_up(std::size_t(partial_states) * std::size_t(in.head_dim_vo) * sizeof(float));
  l.float_bytes = align_up(l.partial_lse + std::size_t(partial_states) * sizeof(float));
}

}  // namespace

Schedule make_schedule(const ScheduleInput& in, const DeviceProfile& profile) {
  const RequestShapes shapes = measure_requests(in);
  const std::int64_t budget = profile.concurrent_items();
  const std::int64_t max_items = in.capacity ? check_capacity_and_size_items(in, shapes, budget) : 0;
  std::int64_t chunk = choose_chunk(in, shapes, budget);

  Schedule s;
  s.q_tile_rows = in.q_tile_rows;
  s.item_warps = choose_item_warps(in, shapes, budget, chunk);
  s.fixed_split = !in.disable_split_kv && in.fixed_split_size > 0;
  lay_out_requests(in, shapes, chunk, s);
  make_items(in, shapes, chunk, s);
  size_arrays(in, max_items, s);
  lay_out_workspace(in, s);
  return s;
}

}  // namespace kvinfer::detail
