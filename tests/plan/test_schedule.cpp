// SPDX-License-Identifier: Apache-2.0
// Properties of the shared planner, checked on random inputs with the CPU's and
// the H200's profiles.
#include <gtest/gtest.h>

#include <chrono>
#include <algorithm>
#include <map>
#include <random>

#include "kvinfer/core/error.hpp"
#include "core/workspace.hpp"
#include "plan/schedule.hpp"
#include "testing/thread_cpu_time.hpp"

namespace kvinfer::detail {
namespace {

struct Inputs {
  std::vector<std::int32_t> qo, kv;
  ScheduleInput in;
};

Inputs random_inputs(std::mt19937_64& rng) {
  Inputs x;
  const int batch = int(rng() % 20);
  for (int b = 0; b < batch; ++b) {
    x.qo.push_back(rng() % 4 == 0 ? 0 : std::int32_t(rng() % 70));
    x.kv.push_back(rng() % 5 == 0 ? 0 : std::int32_t(rng() % 3000));
  }
  x.in.num_kv_heads = 1 + std::int64_t(rng() % 4);
  x.in.num_qo_heads = x.in.num_kv_heads * (1 + std::int64_t(rng() % 8));
  x.in.head_dim_vo = 64;
  x.in.page_size = std::array{1, 5, 16, 1024}[rng() % 4];
  x.in.window_left = rng() % 3 == 0 ? int(rng() % 200) : -1;
  x.in.q_tile_rows = std::array{16, 64, 128}[rng() % 3];
  if (rng() % 3 == 0) x.in.fixed_split_size = 1 + std::int64_t(rng() % 500);
  x.in.disable_split_kv = rng() % 7 == 0;
  x.in.split_waves = rng() % 2 == 0 ? 1 : 4;
  x.in.max_item_warps = std::array{1, 2, 8}[rng() % 3];
  return x;
}

void bind(Inputs& x) {
  x.in.qo_lens = x.qo;
  x.in.kv_lens = x.kv;
}

// Every (packed row, KV head, visible key) is attended by exactly one item: the
// items' key intervals of each row tile the visible range without overlap. Every
// split row has a partial-state slot in range.
void check_coverage(const Inputs& x, const Schedule& s) {
  const std::int64_t group = x.in.num_qo_heads / x.in.num_kv_heads;
  std::map<std::tuple<int, int, int>, std::vector<std::pair<int, int>>> seen;  // (request, head, row) -> intervals
  for (const WorkItem& it : s.items) {
    ASSERT_GE(it.request, 0);
    ASSERT_LT(it.request, std::int32_t(x.qo.size()));
    ASSERT_LE(0, it.kv_begin);
    ASSERT_LE(it.kv_begin, it.kv_end);
    ASSERT_LE(it.kv_end, x.kv[it.request]);
    const RequestInfo& r = s.requests[it.request];
    ASSERT_LT(it.chunk, r.num_chunks);
    for (int row = it.row_begin; row < it.row_end; ++row) {
      seen[{it.request, it.kv_head, row}].emplace_back(it.kv_begin, it.kv_end);
      if (r.num_chunks > 1) {
        const std::int64_t prow = r.partial_begin + std::int64_t(it.chunk) * r.qo_len + row / group;
        ASSERT_LT(prow, s.partial_rows);
        ASSERT_LE(s.partial_rows, s.max_partial_rows);
      }
    }
  }
  for (std::size_t b = 0; b < x.qo.size(); ++b) {
    const KeyRange range = visible_key_range(x.qo[b], x.kv[b], x.in.window_left);
    for (int h = 0; h < x.in.num_kv_heads; ++h) {
      for (int row = 0; row < x.qo[b] * group; ++row) {
        auto it = seen.find({int(b), h, row});
        ASSERT_NE(it, seen.end()) << "row " << row << " of request " << b << " has no item";
        auto intervals = it->second;
        EXPECT_EQ(std::int64_t(intervals.size()), s.requests[b].num_chunks);
        std::sort(intervals.begin(), intervals.end());
        int next = range.first;
        for (auto [lo, hi] : intervals) {
          ASSERT_EQ(lo, next) << "request " << b << " row " << row << ": gap or overlap";
          next = hi;
        }
        ASSERT_EQ(next, range.last) << "request " << b << " row " << row;
      }
    }
    if (x.qo[b] == 0) continue;
    // Merge tokens are exactly the rows of split requests.
    const bool split = s.requests[b].num_chunks > 1;
    int merges = 0;
    for (const MergeToken& m : s.merge_tokens) merges += m.request == int(b);
    EXPECT_EQ(merges, split ? x.qo[b] : 0);
  }
}

void check_layout(const Schedule& s) {
  const WorkspaceLayout& l = s.layout;
  EXPECT_GE(l.items, l.requests + std::size_t(s.max_batch) * sizeof(RequestInfo));
  EXPECT_GE(l.merge_tokens, l.items + std::size_t(s.max_items) * sizeof(WorkItem));
  EXPECT_GE(l.counts, l.merge_tokens + std::size_t(s.max_merge_tokens) * sizeof(MergeToken));
  EXPECT_GE(l.int_bytes, l.counts + 16);
  EXPECT_GE(std::int64_t(s.requests.size()), 0);
  EXPECT_LE(std::int64_t(s.requests.size()), s.max_batch);
  EXPECT_LE(std::int64_t(s.items.size()), s.max_items);
  EXPECT_LE(std::int64_t(s.merge_tokens.size()), s.max_merge_tokens);
  EXPECT_LE(s.partial_rows, s.max_partial_rows);
  EXPECT_EQ(l.int_bytes % 256, 0u);
  EXPECT_GE(l.partial_lse, l.partial_o);
  EXPECT_GE(l.float_bytes, l.partial_lse);
}

TEST(Schedule, CoversEveryRowAndKeyExactlyOnce) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 300; ++trial) {
    Inputs x = random_inputs(rng);
    bind(x);
    for (const DeviceProfile& profile : {DeviceProfile::cpu(2), DeviceProfile::h200()}) {
      const Schedule s = make_schedule(x.in, profile);
      check_coverage(x, s);
      check_layout(s);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(Schedule, SplitsFewLongRequestsAcrossTheGpu) {
  // One 32k decode request on an H200: without split-KV it would use 8 of 264 slots.
  std::vector<std::int32_t> qo{1}, kv{32768};
  ScheduleInput in{.qo_lens = qo, .kv_lens = kv, .num_qo_heads = 32, .num_kv_heads = 8, .page_size = 16,
                   .q_tile_rows = 16};
  const Schedule s = make_schedule(in, DeviceProfile::h200());
  EXPECT_GT(s.requests[0].num_chunks, 16);
  EXPECT_GE(std::int64_t(s.items.size()), DeviceProfile::h200().concurrent_items());  // fills the GPU
  EXPECT_GE(s.kv_chunk_tokens, in.min_chunk_tokens);
  EXPECT_EQ(s.kv_chunk_tokens % 16, 0);
  // One long and many one-token requests: the long one is split too, so that its
  // KV heads do not run alone after the others finish.
  std::vector<std::int32_t> qo_skew(64, 1), kv_skew(64, 1);
  kv_skew[0] = 64 * 4096 - 63;
  in.qo_lens = qo_skew;
  in.kv_lens = kv_skew;
  const Schedule skew = make_schedule(in, DeviceProfile::h200());
  EXPECT_GT(skew.requests[0].num_chunks, 32);
  EXPECT_EQ(skew.requests[1].num_chunks, 1);
  // Many requests already fill the GPU: no split.
  std::vector<std::int32_t> qo2(256, 1), kv2(256, 1024);
  in.qo_lens = qo2;
  in.kv_lens = kv2;
  EXPECT_EQ(make_schedule(in, DeviceProfile::h200()).kv_chunk_tokens, 0);
  // disable_split_kv wins.
  in.qo_lens = qo;
  in.kv_lens = kv;
  in.disable_split_kv = true;
  EXPECT_EQ(make_schedule(in, DeviceProfile::h200()).requests[0].num_chunks, 1);
}

// Items per KV head of a schedule (every head has the same items).
std::int64_t items_per_head(const Schedule& s, std::int64_t heads) { return std::int64_t(s.items.size()) / heads; }

TEST(Schedule, MemoryBoundTilesSplitIntoOneWave) {
  // The decode tile on an H200 (132 SMs, 6 resident one-warp CTAs): 99 slots per KV head.
  const DeviceProfile gpu{132, 6};
  const std::int64_t slots_per_head = gpu.concurrent_items() / 8;
  ScheduleInput in{.num_qo_heads = 32, .num_kv_heads = 8, .page_size = 16, .q_tile_rows = 16, .split_waves = 1};
  const auto plan = [&](const std::vector<std::int32_t>& kv) {
    const std::vector<std::int32_t> qo(kv.size(), 1);
    in.qo_lens = qo;
    in.kv_lens = kv;
    return make_schedule(in, gpu);
  };
  // 64 requests already make 64 items per head: within one wave, nothing is split.
  EXPECT_EQ(plan(std::vector<std::int32_t>(64, 4096)).kv_chunk_tokens, 0);
  // So do 128 (more than a wave, and every request alike).
  EXPECT_EQ(plan(std::vector<std::int32_t>(128, 2048)).kv_chunk_tokens, 0);
  // One long request: the smallest chunk (whole pages) that keeps its items in one
  // wave, so one page less would not.
  const Schedule one = plan({32768});
  const std::int64_t c = one.kv_chunk_tokens;
  ASSERT_GT(c, 0);
  EXPECT_EQ(c % 16, 0);
  EXPECT_LE(items_per_head(one, 8), slots_per_head);
  EXPECT_GT((32768 + (c - 16) - 1) / (c - 16), slots_per_head);
  // With four waves the same request is cut finer, here down to the minimum chunk.
  in.split_waves = 4;
  const Schedule four = plan({32768});
  EXPECT_GT(items_per_head(four, 8), items_per_head(one, 8));
  EXPECT_LE(items_per_head(four, 8), 4 * slots_per_head);
  EXPECT_EQ(four.kv_chunk_tokens, in.min_chunk_tokens);
  in.split_waves = 1;
  // One long request next to short ones: fitting the items into one wave would
  // leave items of 7k keys next to one-key items, so the long request gets chunks
  // of a slot's share of the work (in whole pages), a wave's worth of them.
  std::vector<std::int32_t> skew(64, 1);
  skew[0] = 64 * 4096 - 63;
  const Schedule sk = plan(skew);
  const std::int64_t share = (64 * 4096 + slots_per_head - 1) / slots_per_head;
  EXPECT_GE(sk.requests[0].num_chunks, slots_per_head);
  EXPECT_EQ(sk.kv_chunk_tokens, (share + 15) / 16 * 16);
  for (std::size_t b = 1; b < skew.size(); ++b) EXPECT_EQ(sk.requests[b].num_chunks, 1);
  // A contiguous cache (one page per request): chunks cut the page in 16-key steps,
  // as many as for small pages, rather than leaving the request whole.
  in.page_size = 32768;
  const Schedule contiguous = plan({32768});
  EXPECT_EQ(contiguous.kv_chunk_tokens, c);
  in.page_size = 16;
  // Query tiles beyond the wave: only a request longer than a slot's share of the
  // work is split, the short ones stay whole.
  std::vector<std::int32_t> mixed(200, 100);
  mixed[0] = 100000;
  const Schedule m = plan(mixed);
  EXPECT_GT(m.requests[0].num_chunks, 1);
  for (std::size_t b = 1; b < mixed.size(); ++b) EXPECT_EQ(m.requests[b].num_chunks, 1);
}

TEST(Schedule, ItemWarpsTakeTheSplitIntoTheCta) {
  // The decode tile on an H200 (132 SMs, 8 resident one-warp CTAs), with CTAs of up
  // to 8 item warps: 132 warp slots per KV head.
  const DeviceProfile gpu{132, 8};
  const std::int64_t heads = 8, slots_per_head = gpu.concurrent_items() / heads;
  ScheduleInput in{.num_qo_heads = 32, .num_kv_heads = heads, .page_size = 16, .q_tile_rows = 16,
                   .min_chunk_tokens = 512, .max_item_warps = 8, .min_warp_tokens = 256, .split_waves = 1};
  const auto plan = [&](const std::vector<std::int32_t>& kv) {
    const std::vector<std::int32_t> qo(kv.size(), 1);
    in.qo_lens = qo;
    in.kv_lens = kv;
    const Schedule s = make_schedule(in, gpu);
    if (s.item_warps > 1) EXPECT_LE(std::int64_t(s.items.size()) * s.item_warps, slots_per_head * heads);  // one wave
    return s;
  };
  // One 32k request: warps of 256 keys (1024 in all, one wave), 8 per item, so 16
  // chunks to merge instead of 64 chunks of 512 keys.
  Schedule s = plan({32768});
  EXPECT_EQ(s.item_warps, 8);
  EXPECT_EQ(s.kv_chunk_tokens, 2048);
  EXPECT_EQ(s.requests[0].num_chunks, 16);
  // 16 x 8k: 8 warps of 1k keys per request and head, nothing left to merge.
  s = plan(std::vector<std::int32_t>(16, 8192));
  EXPECT_EQ(s.item_warps, 8);
  EXPECT_EQ(s.kv_chunk_tokens, 0);
  // 64 x 4k and 64 x 16k: 2 warps per item, no split.
  for (std::int32_t len : {4096, 16384}) {
    s = plan(std::vector<std::int32_t>(64, len));
    EXPECT_EQ(s.item_warps, 2) << len;
    EXPECT_EQ(s.kv_chunk_tokens, 0) << len;
  }
  // 128 x 2k fills the slots with one warp per item; 256 x 1k more than fills them.
  for (auto [batch, len] : {std::pair{128, 2048}, {256, 1024}}) {
    s = plan(std::vector<std::int32_t>(std::size_t(batch), len));
    EXPECT_EQ(s.item_warps, 1) << batch;
    EXPECT_EQ(s.kv_chunk_tokens, 0) << batch;
  }
  // Skewed lengths keep one warp per item (the short requests' items would idle warps).
  std::vector<std::int32_t> skew(64, 1);
  skew[0] = 64 * 4096 - 63;
  EXPECT_EQ(plan(skew).item_warps, 1);
  // A fixed split size (batch-invariant results), no split at all, and a fixed
  // capacity (one launch shape for every re-plan) keep one warp per item.
  in.fixed_split_size = 1024;
  EXPECT_EQ(plan({32768}).item_warps, 1);
  in.fixed_split_size = -1;
  in.disable_split_kv = true;
  EXPECT_EQ(plan({32768}).item_warps, 1);
  in.disable_split_kv = false;
  in.capacity = ScheduleInput::Capacity{.max_batch = 4, .max_qo_tokens = 4, .max_kv_tokens = 65536, .max_qo_len = 1};
  EXPECT_EQ(plan({32768}).item_warps, 1);
}

TEST(Schedule, FixedSplitDependsOnlyOnTheRequest) {
  std::mt19937_64 rng(2);
  std::vector<std::int32_t> qo{5, 1, 33}, kv{1000, 77, 4000};
  ScheduleInput in{.qo_lens = qo, .kv_lens = kv, .num_qo_heads = 8, .num_kv_heads = 2, .page_size = 16,
                   .q_tile_rows = 64, .fixed_split_size = 100};
  const Schedule all = make_schedule(in, DeviceProfile::h200());
  for (std::size_t b = 0; b < qo.size(); ++b) {
    ScheduleInput one = in;
    one.qo_lens = std::span(qo).subspan(b, 1);
    one.kv_lens = std::span(kv).subspan(b, 1);
    const Schedule alone = make_schedule(one, DeviceProfile::cpu(1));
    std::vector<std::tuple<int, int, int, int, int>> a, c;
    for (const WorkItem& it : all.items)
      if (it.request == int(b)) a.emplace_back(it.kv_head, it.row_begin, it.row_end, it.kv_begin, it.kv_end);
    for (const WorkItem& it : alone.items) c.emplace_back(it.kv_head, it.row_begin, it.row_end, it.kv_begin, it.kv_end);
    EXPECT_EQ(a, c) << "request " << b;
    EXPECT_EQ(all.requests[b].num_chunks, alone.requests[0].num_chunks);
  }
  EXPECT_EQ(all.kv_chunk_tokens, 112);  // rounded up to whole pages
}

TEST(Schedule, ReplanWithinCapacityKeepsLayoutAndGrid) {
  std::mt19937_64 rng(3);
  const ScheduleInput::Capacity cap{.max_batch = 64, .max_qo_tokens = 512};
  std::optional<Schedule> first;
  for (int trial = 0; trial < 100; ++trial) {
    Inputs x;
    const int batch = 1 + int(rng() % 64);
    int tokens = 0;
    for (int b = 0; b < batch; ++b) {
      const int q = std::min<int>(int(rng() % 20), 512 - tokens);
      tokens += q;
      x.qo.push_back(q);
      x.kv.push_back(std::int32_t(rng() % 20000));
    }
    x.in.num_qo_heads = 32;
    x.in.num_kv_heads = 8;
    x.in.page_size = 16;
    x.in.q_tile_rows = 64;
    x.in.capacity = cap;
    bind(x);
    const Schedule s = make_schedule(x.in, DeviceProfile::h200());
    check_coverage(x, s);
    if (!first) {
      first = s;
      continue;
    }
    EXPECT_EQ(s.max_items, first->max_items);
    EXPECT_EQ(s.max_batch, first->max_batch);
    EXPECT_EQ(s.max_merge_tokens, first->max_merge_tokens);
    EXPECT_EQ(s.max_partial_rows, first->max_partial_rows);
    EXPECT_EQ(s.layout.items, first->layout.items);
    EXPECT_EQ(s.layout.merge_tokens, first->layout.merge_tokens);
    EXPECT_EQ(s.layout.counts, first->layout.counts);
    EXPECT_EQ(s.layout.int_bytes, first->layout.int_bytes);
    EXPECT_EQ(s.layout.partial_lse, first->layout.partial_lse);
    EXPECT_EQ(s.layout.float_bytes, first->layout.float_bytes);
  }
}

TEST(Schedule, CapacityExceededIsAnError) {
  std::vector<std::int32_t> qo{10, 10}, kv{5, 5};
  ScheduleInput in{.qo_lens = qo, .kv_lens = kv, .num_qo_heads = 4, .num_kv_heads = 4, .q_tile_rows = 64,
                   .capacity = ScheduleInput::Capacity{1, 100}};
  EXPECT_THROW(make_schedule(in, DeviceProfile::h200()), Error);
  in.capacity = ScheduleInput::Capacity{2, 19};
  EXPECT_THROW(make_schedule(in, DeviceProfile::h200()), Error);
}

// Every item carries its request's kv_begin (kernels locate an item's first keys
// from the item alone), and so does every RequestInfo.
TEST(Schedule, KvBeginsReachRequestsAndItems) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    Inputs x = random_inputs(rng);
    bind(x);
    std::vector<std::int32_t> begins(x.qo.size());
    for (auto& b : begins) b = std::int32_t(rng() % 100000);
    x.in.kv_begin = begins;
    const Schedule s = make_schedule(x.in, DeviceProfile::h200());
    for (std::size_t b = 0; b < begins.size(); ++b) EXPECT_EQ(s.requests[b].kv_begin, begins[b]);
    for (const WorkItem& it : s.items) EXPECT_EQ(it.kv_base, begins[std::size_t(it.request)]);
  }
}

// A fixed capacity leaves entries of the item array past the plan's items; the
// uploaded workspace marks them unused (a kernel launched over the capacity reads
// its own entry, not the count), and the plan's items are as planned.
TEST(Schedule, WorkspaceMarksUnusedItems) {
  std::vector<std::int32_t> qo{1, 1, 1}, kv{700, 30, 5000}, begins{0, 44, 46};
  ScheduleInput in{.qo_lens = qo, .kv_lens = kv, .kv_begin = begins, .num_qo_heads = 32, .num_kv_heads = 8, .page_size = 16,
                   .q_tile_rows = 16,
                   .capacity = ScheduleInput::Capacity{.max_batch = 16, .max_qo_tokens = 16, .max_kv_tokens = 1 << 16,
                                                       .max_qo_len = 1}};
  const Schedule s = make_schedule(in, DeviceProfile::h200());
  ASSERT_LT(std::int64_t(s.items.size()), s.max_items);
  PlanWorkspace ws(Device::cpu(), true);
  ws.upload("plan", s, 3, 3);
  const ScheduleView v = ws.view(s.layout);
  ASSERT_EQ(v.counts[0], std::int32_t(s.items.size()));
  for (std::int64_t i = 0; i < s.max_items; ++i) {
    if (i < std::int64_t(s.items.size())) {
      EXPECT_EQ(v.items[i].request, s.items[std::size_t(i)].request) << i;
      EXPECT_EQ(v.items[i].kv_base, s.items[std::size_t(i)].kv_base) << i;
    } else {
      EXPECT_EQ(v.items[i].request, kUnusedItem) << i;
    }
  }
}

TEST(Schedule, PlanOfBatch256TakesUnder50Microseconds) {
  std::vector<std::int32_t> qo(256, 1), kv(256);
  std::mt19937_64 rng(4);
  for (auto& k : kv) k = 1 + std::int32_t(rng() % 8192);
  ScheduleInput in{.qo_lens = qo, .kv_lens = kv, .num_qo_heads = 32, .num_kv_heads = 8, .page_size = 16,
                   .q_tile_rows = 16};
  bool scheduled = true;
  std::vector<double> us = testing::thread_cpu_times(
      101, [&] { scheduled = scheduled && !make_schedule(in, DeviceProfile::h200()).items.empty(); });
  ASSERT_TRUE(scheduled);
  std::nth_element(us.begin(), us.begin() + 50, us.end());
  EXPECT_LT(us[50], 50.0) << "median plan time in microseconds of thread CPU time";
}

}  // namespace
}  // namespace kvinfer::detail
