// SPDX-License-Identifier: Apache-2.0
// Prefill on the GPU: PERF.md's shapes (16k tokens as 16x1k, 4x4k, 1x16k; 32 heads;
// bf16; head_dim 64/128/256; causal and not), GQA 32/8 at head_dim 128, 4x4k at head_dim 512, and a skewed
// batch (one 8k prompt beside ever shorter ones, 16k tokens in all) through the ragged
// wrapper and the paged wrapper at page 16 (same shapes). Reports TFLOP/s (visible query-key pairs
// only: causal counts the triangle) against the bf16 GEMM rate of the same run. Each
// shape is a test case description (tests/testing); --check runs it (ragged, then
// paged) through the test harness against the float64 oracle before it is timed.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "bench/common/case_metrics.hpp"
#include "bench/common/cases.hpp"
#include "bench/common/gpu_json.hpp"
#include "bench/common/gpu_report.hpp"
#include "bench/common/page_table.hpp"
#include "bench/common/report.hpp"
#include "kvinfer/kvinfer.hpp"

using namespace kvinfer;
using namespace kvinfer::bench;

namespace {

constexpr std::int64_t kHeads = 32, kPage = 16;

// `batch` prompts of `len` tokens, 32 query heads over kv_heads: the tests' description
// of the ragged case; the paged one is the same with wrapper kPagedPrefill and page 16.
testing::AttentionCase prefill_shape(std::int64_t batch, std::int32_t len, std::int64_t head_dim, bool causal,
                                     std::int64_t kv_heads = kHeads) {
  return prefill_case(std::to_string(batch) + "x" + std::to_string(len) + " d" + std::to_string(head_dim) +
                          (kv_heads != kHeads ? " gqa" + std::to_string(kHeads) + "/" + std::to_string(kv_heads) : "") +
                          (causal ? " causal" : ""),
                      testing::Wrapper::kRaggedPrefill, batch, len, kHeads, kv_heads, head_dim, causal);
}

// A skewed batch of 16k tokens: 8k, 4k, 2k, 1k, 512, 256, 128, 64 and 64 tokens
// (one launch covers requests of 1 to 64 tiles of 128 rows).
testing::AttentionCase skewed_shape(std::int64_t head_dim, bool causal) {
  testing::AttentionCase c = prefill_shape(1, 8192, head_dim, causal);
  c.qo_lens = c.kv_lens = {8192, 4096, 2048, 1024, 512, 256, 128, 64, 64};
  c.name = "skewed16k d" + std::to_string(head_dim) + (causal ? " causal" : "");
  return c;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(
      argc, argv,
      {.description =
           "Prefill on the GPU (ragged and paged): TFLOP/s against the bf16 GEMM rate of the same run",
       .has_check = kHaveCheck});
  Report report = gpu_report("prefill");
  const Ceiling gemm = measure_gemm_bf16();
  report.meta()["ceilings"] = {{"gemm_bf16", to_json(gemm)}};
  std::printf("bf16 GEMM: %.0f TFLOP/s (%s)\n", gemm.value, gemm.detail.c_str());

  std::vector<testing::AttentionCase> shapes;
  for (std::int64_t d : {128, 64, 256})
    for (bool causal : {false, true})
      for (auto [b, l] : {std::pair<std::int64_t, std::int32_t>{16, 1024}, {4, 4096}, {1, 16384}})
        shapes.push_back(prefill_shape(b, l, d, causal));
  for (bool causal : {false, true}) {
    shapes.push_back(prefill_shape(4, 4096, 128, causal, 8));
    shapes.push_back(skewed_shape(128, causal));
    shapes.push_back(prefill_shape(4, 4096, 512, causal));  // the column-sliced tensor-core tile
  }
  if (args.quick) shapes.resize(2);
  std::erase_if(shapes, [&](const testing::AttentionCase& s) { return !args.selected(s.name); });

  const Device gpu = Device::cuda(0);
  GpuTimer timer;
  // Standalone times: no programmatic launch, so that no run overlaps the L2 flush
  // before it (bench_layer_steps measures what that overlap saves between kernels).
  const RunOptions standalone{.stream = timer.stream(), .enable_pdl = false};
  std::uint64_t seed = 1;
  bool all_ok = true;
  for (const testing::AttentionCase& s : shapes) {
    const auto batch = std::int64_t(s.qo_lens.size());
    const std::int64_t len = s.qo_lens[0], tokens = total_qo_len(s), d = s.head_dim_qk;
    const std::int64_t hk = s.num_kv_heads;
    const bool causal = s.options.mask_mode == MaskMode::kCausal;
    testing::AttentionCase paged = s;
    paged.wrapper = testing::Wrapper::kPagedPrefill;
    paged.page_size = kPage;
    nlohmann::json check;
    for (const auto& [c, kind] : {std::pair<const testing::AttentionCase*, const char*>{&s, "ragged"},
                                  {&paged, "paged16"}}) {
      char label[128];
      std::snprintf(label, sizeof label, "%-24s %-7s", c->name.c_str(), kind);
      nlohmann::json one = check_field(args, *c, gpu, all_ok, 0, label);
      if (!one.is_null()) check[kind] = std::move(one);
    }
    std::vector<std::int32_t> indptr{0};
    for (const std::int32_t l : s.qo_lens) indptr.push_back(indptr.back() + l);
    Tensor q = Tensor::empty({tokens, kHeads, d}, DType::kBF16, gpu);
    Tensor k = Tensor::empty({tokens, hk, d}, DType::kBF16, gpu);
    Tensor v = Tensor::empty({tokens, hk, d}, DType::kBF16, gpu);
    Tensor out = Tensor::empty({tokens, kHeads, d}, DType::kBF16, gpu);
    for (Tensor* t : {&q, &k, &v})
      fill_random_uniform(t->data(), std::size_t(t->numel()), RandomKind::kBF16, seed++);
    const AttentionOptions options = s.options;
    const double work = attention_flops(s);
    const auto add = [&](const std::string& wrapper, const Timing& t) {
      const double tflops = work / (t.median_us * 1e6);
      nlohmann::json row = {{"name", s.name},
                            {"wrapper", wrapper},
                            {"batch", batch},
                            {"len", len},
                            {"D", d},
                            {"heads", kHeads},
                            {"kv_heads", hk},
                            {"causal", causal},
                            {"median_us", t.median_us},
                            {"p10_us", t.p10_us},
                            {"p90_us", t.p90_us},
                            {"TFLOPs", tflops},
                            {"frac_gemm", tflops / gemm.value}};
      if (!check.is_null()) row["check"] = check;
      report.add_row(std::move(row));
    };

    // The automatic kernel (the Hopper mainloop on sm_90) and the portable one.
    for (PrefillBackend backend : {PrefillBackend::kAuto, PrefillBackend::kPortable}) {
      AttentionOptions opts = options;
      opts.backend = backend;
      const std::string suffix = backend == PrefillBackend::kAuto ? "" : " portable";
      {
        BatchPrefillWithRaggedKVCache w(gpu);
        const Tensor qi = host_i32(indptr);
        w.plan({.qo_indptr = qi,
                .kv_indptr = qi,
                .num_qo_heads = kHeads,
                .num_kv_heads = hk,
                .head_dim_qk = d,
                .options = opts});
        add("ragged" + suffix,
            timer.time([&] { w.run(q, k, v, out, standalone); }, 3, std::max(args.runs, 20), true));
      }
      {
        // The same K/V as a paged cache (pages in shuffled order).
        const PageTableTensors table = to_tensors(make_page_table(paged.kv_lens, kPage, seed), gpu);
        const std::int64_t num_pages = table.indices.numel();
        Tensor cache = Tensor::empty({num_pages, 2, kPage, hk, d}, DType::kBF16, gpu);
        fill_random_uniform(cache.data(), std::size_t(cache.numel()), RandomKind::kBF16, seed++);
        const Tensor qi = host_i32(indptr);
        BatchPrefillWithPagedKVCache w(gpu);
        w.plan({.qo_indptr = qi,
                .page_table = table.view(),
                .num_qo_heads = kHeads,
                .num_kv_heads = hk,
                .head_dim = d,
                .page_size = kPage,
                .options = opts});
        const PagedKVCache kv = PagedKVCache::combined(cache);
        add("paged16" + suffix,
            timer.time([&] { w.run(q, kv, out, standalone); }, 3, std::max(args.runs, 20), true));
      }
    }
  }
  report.meta()["target"] = "ragged >= torch SDPA flash (FA2) TFLOP/s; paged16 >= 90% of ragged";
  report.finish(args, {"name", "wrapper", "median_us", "TFLOPs", "frac_gemm"});
  return all_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_prefill: %s\n", e.what());
  return 1;
}
