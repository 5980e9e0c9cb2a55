// SPDX-License-Identifier: Apache-2.0
// Cascade decode on the GPU (PERF.md): a 32k-token prefix shared by a batch of 64
// or 128 requests, each with a unique suffix of 256 tokens (Hq 32 / Hk 8, d 128,
// page 16, bf16). MultiLevelCascadeAttention reads the prefix once for the whole
// batch; plain paged decode of the same batch reads it once per request. Reports
// both times and their ratio (target: cascade <= 1/10 of plain). The levels are the
// tests' description (tests/testing: LevelSpec).
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "bench/common/gpu_json.hpp"
#include "bench/common/gpu_report.hpp"
#include "bench/common/page_table.hpp"
#include "bench/common/report.hpp"
#include "kvinfer/kvinfer.hpp"
#include "testing/cascade_case.hpp"

using namespace kvinfer;
using namespace kvinfer::bench;

namespace {

constexpr std::int64_t kHq = 32, kHk = 8, kD = 128, kPage = 16;
constexpr std::int32_t kPrefix = 32768, kSuffix = 256;

// The page tables of a cascade over one pool, one query row per request: per level
// its subtrees' tables (pages taken from the pool level by level, subtree by
// subtree) and the rows each subtree covers; and the plain table in which each
// request lists its levels' pages in order.
struct CascadeTables {
  std::vector<HostPageTable> levels;
  std::vector<std::vector<std::int32_t>> level_qo_indptr;
  HostPageTable plain;
};

CascadeTables cascade_tables(const std::vector<testing::LevelSpec>& levels, std::int64_t batch,
                             std::span<const std::int32_t> pool) {
  CascadeTables t;
  std::vector<std::vector<std::int32_t>> request_pages(static_cast<std::size_t>(batch));
  std::vector<std::int64_t> request_len(static_cast<std::size_t>(batch), 0);
  std::size_t next = 0;
  for (const testing::LevelSpec& level : levels) {
    HostPageTable& table = t.levels.emplace_back();
    std::vector<std::int32_t>& rows = t.level_qo_indptr.emplace_back(1, 0);
    for (std::size_t sub = 0; sub < level.lens.size(); ++sub) {
      const auto n = std::size_t(pages_for(level.lens[sub], kPage));
      const std::span<const std::int32_t> pages = pool.subspan(next, n);
      next += n;
      table.add(pages, level.lens[sub], kPage);
      const int end = sub + 1 < level.first_request.size() ? level.first_request[sub + 1] : int(batch);
      rows.push_back(end);
      for (int r = level.first_request[sub]; r < end; ++r) {
        request_pages[std::size_t(r)].insert(request_pages[std::size_t(r)].end(), pages.begin(), pages.end());
        request_len[std::size_t(r)] += level.lens[sub];
      }
    }
  }
  for (std::int64_t r = 0; r < batch; ++r)
    t.plain.add(request_pages[std::size_t(r)], request_len[std::size_t(r)], kPage);
  return t;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(
      argc, argv,
      {.description =
           "Cascade decode on the GPU: a 32k-token prefix shared by a batch, against plain paged decode"});
  Report report = gpu_report("cascade");
  const Device gpu = Device::cuda(0);
  GpuTimer timer;
  // Standalone times: no programmatic launch, so that no run overlaps the L2 flush
  // before it (bench_layer_steps measures what that overlap saves between kernels).
  const RunOptions standalone{.stream = timer.stream(), .enable_pdl = false};
  std::vector<std::int64_t> batches = {64, 128};
  if (args.quick) batches.resize(1);
  for (const std::int64_t batch : batches) {
    // Level 0: one subtree, the prefix, for all requests; level 1: each request's suffix.
    std::vector<testing::LevelSpec> levels(2);
    levels[0] = {{0}, {kPrefix}};
    for (std::int64_t b = 0; b < batch; ++b) {
      levels[1].first_request.push_back(int(b));
      levels[1].lens.push_back(kSuffix);
    }
    // Pages: the prefix's first, then each request's suffix, in shuffled pool order.
    const std::int64_t num_pages = pages_for(kPrefix, kPage) + batch * pages_for(kSuffix, kPage);
    const CascadeTables tables = cascade_tables(levels, batch, page_pool(num_pages, 7));
    Tensor cache = Tensor::empty({num_pages, 2, kPage, kHk, kD}, DType::kBF16, gpu);
    fill_random_uniform(cache.data(), std::size_t(cache.numel()), RandomKind::kBF16, 1);
    Tensor q = Tensor::empty({batch, kHq, kD}, DType::kBF16, gpu),
           out = Tensor::empty({batch, kHq, kD}, DType::kBF16, gpu);
    fill_random_uniform(q.data(), std::size_t(q.numel()), RandomKind::kBF16, 2);
    const PagedKVCache kv = PagedKVCache::combined(cache);

    // Plain decode: every request's table lists the prefix pages, then its own.
    const PageTableTensors plain_table = to_tensors(tables.plain, gpu);
    BatchDecodeWithPagedKVCache plain(gpu);
    plain.plan({.page_table = plain_table.view(),
                .num_qo_heads = kHq,
                .num_kv_heads = kHk,
                .head_dim = kD,
                .page_size = kPage});
    const Timing t_plain =
        timer.time([&] { plain.run(q, kv, out, standalone); }, 3, std::max(args.runs, 20), true);

    const Tensor l0_qo = host_i32(tables.level_qo_indptr[0]), l1_qo = host_i32(tables.level_qo_indptr[1]);
    const PageTableTensors l0 = to_tensors(tables.levels[0], gpu), l1 = to_tensors(tables.levels[1], gpu);
    // The planner's split, then fixed ones: how much the prefix level's chunking costs.
    for (const std::int64_t split :
         {std::int64_t(-1), std::int64_t(2048), std::int64_t(4096), std::int64_t(8192)}) {
      const std::string name = std::to_string(batch) + " x (32k shared + 256)" +
                               (split > 0 ? " split" + std::to_string(split) : std::string());
      if (!args.selected(name)) continue;
      MultiLevelCascadeAttention cascade(2, gpu);
      cascade.plan({.levels = {{l0_qo, l0.view()}, {l1_qo, l1.view()}},
                    .num_qo_heads = kHq,
                    .num_kv_heads = kHk,
                    .head_dim = kD,
                    .page_size = kPage,
                    .split = {.fixed_split_size = split}});
      const Timing t_cascade =
          timer.time([&] { cascade.run(q, kv, out, standalone); }, 3, std::max(args.runs, 20), true);
      report.add_row({{"name", name},
                      {"batch", batch},
                      {"plain_us", t_plain.median_us},
                      {"cascade_us", t_cascade.median_us},
                      {"ratio", t_cascade.median_us / t_plain.median_us},
                      {"plain_p10_us", t_plain.p10_us},
                      {"cascade_p10_us", t_cascade.p10_us}});
    }
  }
  report.meta()["target"] = "cascade time <= 1/10 of plain paged decode of the same batch";
  report.finish(args, {"name", "plain_us", "cascade_us", "ratio"});
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_cascade: %s\n", e.what());
  return 1;
}
