// SPDX-License-Identifier: Apache-2.0
// Cascade decode on the GPU (PERF.md): a 32k-token prefix shared by a batch of 64
// or 128 requests, each with a unique suffix of 256 tokens (Hq 32 / Hk 8, d 128,
// page 16, bf16). MultiLevelCascadeAttention reads the prefix once for the whole
// batch; plain paged decode of the same batch reads it once per request. Reports
// both times and their ratio (target: cascade <= 1/10 of plain).
#include <cstdio>
#include <exception>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/common/gpu_json.hpp"
#include "bench/common/host_tensor.hpp"
#include "bench/common/report.hpp"
#include "kvinfer/kvinfer.hpp"

using namespace kvinfer;
using namespace kvinfer::bench;

namespace {

constexpr std::int64_t kHq = 32, kHk = 8, kD = 128, kPage = 16;
constexpr std::int32_t kPrefix = 32768, kSuffix = 256;

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(argc, argv);
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_cascade: no GPU\n");
    return 1;
  }
  Report report("cascade");
  report.meta()["device"] = to_json(device_info());
  const Device gpu = Device::cuda(0);
  GpuTimer timer;
  // Standalone times: no programmatic launch, so that no run overlaps the L2 flush
  // before it (bench_layer_steps measures what that overlap saves between kernels).
  const RunOptions standalone{.stream = timer.stream(), .enable_pdl = false};
  std::vector<std::int64_t> batches = {64, 128};
  if (args.quick) batches.resize(1);
  for (const std::int64_t batch : batches) {
    // Pages: the prefix's first, then each request's suffix, in shuffled pool order.
    const std::int32_t prefix_pages = kPrefix / kPage, suffix_pages = kSuffix / kPage;
    const std::int64_t num_pages = prefix_pages + batch * suffix_pages;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(num_pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(7));
    const std::vector<std::int32_t> prefix(ids.begin(), ids.begin() + prefix_pages);
    Tensor cache = Tensor::empty({num_pages, 2, kPage, kHk, kD}, DType::kBF16, gpu);
    fill_random_uniform(cache.data(), std::size_t(cache.numel()), RandomKind::kBF16, 1);
    Tensor q = Tensor::empty({batch, kHq, kD}, DType::kBF16, gpu), out = Tensor::empty({batch, kHq, kD}, DType::kBF16, gpu);
    fill_random_uniform(q.data(), std::size_t(q.numel()), RandomKind::kBF16, 2);
    const PagedKVCache kv = PagedKVCache::combined(cache);

    // Plain decode: every request's table lists the prefix pages, then its own.
    std::vector<std::int32_t> indptr{0}, indices, last;
    // Cascade: level 0 is one subtree (the prefix) for all rows, level 1 one per request.
    std::vector<std::int32_t> l1_indptr{0}, l1_indices, l1_last, rows{0};
    for (std::int64_t b = 0; b < batch; ++b) {
      indices.insert(indices.end(), prefix.begin(), prefix.end());
      const auto own = ids.begin() + prefix_pages + b * suffix_pages;
      indices.insert(indices.end(), own, own + suffix_pages);
      l1_indices.insert(l1_indices.end(), own, own + suffix_pages);
      indptr.push_back(std::int32_t(indices.size()));
      l1_indptr.push_back(std::int32_t(l1_indices.size()));
      last.push_back(kPage);
      l1_last.push_back(kPage);
      rows.push_back(std::int32_t(b + 1));
    }
    const Tensor p_indptr = host_i32(indptr), p_last = host_i32(last), p_indices = host_i32(indices).to(gpu);
    BatchDecodeWithPagedKVCache plain(gpu);
    plain.plan({.page_table = {p_indptr, p_indices, p_last}, .num_qo_heads = kHq, .num_kv_heads = kHk,
                .head_dim = kD, .page_size = kPage});
    const Timing t_plain =
        timer.time([&] { plain.run(q, kv, out, standalone); }, 3, std::max(args.runs, 20), true);

    const Tensor l0_qo = host_i32({0, std::int32_t(batch)}), l0_indptr = host_i32({0, prefix_pages}),
                 l0_last = host_i32({std::int32_t(kPage)}), l0_indices = host_i32(prefix).to(gpu);
    const Tensor l1_qo = host_i32(rows), l1_ip = host_i32(l1_indptr), l1_ls = host_i32(l1_last),
                 l1_ix = host_i32(l1_indices).to(gpu);
    // The planner's split, then fixed ones: how much the prefix level's chunking costs.
    for (const std::int64_t split : {std::int64_t(-1), std::int64_t(2048), std::int64_t(4096), std::int64_t(8192)}) {
      const std::string name = std::to_string(batch) + " x (32k shared + 256)" +
                               (split > 0 ? " split" + std::to_string(split) : std::string());
      if (!args.selected(name)) continue;
      MultiLevelCascadeAttention cascade(2, gpu);
      cascade.plan({.levels = {{l0_qo, {l0_indptr, l0_indices, l0_last}}, {l1_qo, {l1_ip, l1_ix, l1_ls}}},
                    .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage,
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
