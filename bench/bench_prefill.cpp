// SPDX-License-Identifier: Apache-2.0
// Prefill on the GPU: PERF.md's shapes (16k tokens as 16x1k, 4x4k, 1x16k; 32 heads;
// bf16; head_dim 64/128/256; causal and not) through the ragged wrapper and the
// paged wrapper at page 16 (same shapes). Reports TFLOP/s (visible query-key pairs
// only: causal counts the triangle) against the bf16 GEMM rate of the same run.
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

struct PrefillShape {
  std::int64_t batch, len, head_dim;
  bool causal;
  std::string name() const {
    return std::to_string(batch) + "x" + std::to_string(len) + " d" + std::to_string(head_dim) +
           (causal ? " causal" : "");
  }
};

constexpr std::int64_t kHeads = 32, kPage = 16;

// Multiply-adds of QK^T and PV over the visible pairs, times 2.
double flops(const PrefillShape& s) {
  const double l = double(s.len);
  const double pairs = s.causal ? l * (l + 1) / 2 : l * l;
  return 4.0 * double(s.batch) * pairs * double(kHeads) * double(s.head_dim);
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(argc, argv);
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_prefill: no GPU\n");
    return 1;
  }
  Report report("prefill");
  report.meta()["device"] = to_json(device_info());
  const Ceiling gemm = measure_gemm_bf16();
  report.meta()["ceilings"] = {{"gemm_bf16", to_json(gemm)}};
  std::printf("bf16 GEMM: %.0f TFLOP/s (%s)\n", gemm.value, gemm.detail.c_str());

  std::vector<PrefillShape> shapes;
  for (std::int64_t d : {128, 64, 256})
    for (bool causal : {false, true})
      for (auto [b, l] : {std::pair<std::int64_t, std::int64_t>{16, 1024}, {4, 4096}, {1, 16384}})
        shapes.push_back({b, l, d, causal});
  if (args.quick) shapes.resize(2);
  std::erase_if(shapes, [&](const PrefillShape& s) { return !args.selected(s.name()); });

  const Device gpu = Device::cuda(0);
  GpuTimer timer;
  // Standalone times: no programmatic launch, so that no run overlaps the L2 flush
  // before it (bench_layer_steps measures what that overlap saves between kernels).
  const RunOptions standalone{.stream = timer.stream(), .enable_pdl = false};
  std::uint64_t seed = 1;
  for (const PrefillShape& s : shapes) {
    const std::int64_t tokens = s.batch * s.len, d = s.head_dim;
    std::vector<std::int32_t> indptr{0};
    for (std::int64_t b = 0; b < s.batch; ++b) indptr.push_back(indptr.back() + std::int32_t(s.len));
    Tensor q = Tensor::empty({tokens, kHeads, d}, DType::kBF16, gpu);
    Tensor k = Tensor::empty({tokens, kHeads, d}, DType::kBF16, gpu);
    Tensor v = Tensor::empty({tokens, kHeads, d}, DType::kBF16, gpu);
    Tensor out = Tensor::empty({tokens, kHeads, d}, DType::kBF16, gpu);
    for (Tensor* t : {&q, &k, &v}) fill_random_uniform(t->data(), std::size_t(t->numel()), RandomKind::kBF16, seed++);
    const AttentionOptions options{.mask_mode = s.causal ? MaskMode::kCausal : MaskMode::kNone};
    const double work = flops(s);
    const auto add = [&](const std::string& wrapper, const Timing& t) {
      const double tflops = work / (t.median_us * 1e6);
      report.add_row({{"name", s.name()},
                      {"wrapper", wrapper},
                      {"batch", s.batch},
                      {"len", s.len},
                      {"D", d},
                      {"heads", kHeads},
                      {"causal", s.causal},
                      {"median_us", t.median_us},
                      {"p10_us", t.p10_us},
                      {"p90_us", t.p90_us},
                      {"TFLOPs", tflops},
                      {"frac_gemm", tflops / gemm.value}});
    };

    // The automatic kernel (the Hopper mainloop on sm_90) and the portable one.
    for (PrefillBackend backend : {PrefillBackend::kAuto, PrefillBackend::kPortable}) {
      AttentionOptions opts = options;
      opts.backend = backend;
      const std::string suffix = backend == PrefillBackend::kAuto ? "" : " portable";
      {
        BatchPrefillWithRaggedKVCache w(gpu);
        const Tensor qi = host_i32(indptr);
        w.plan({.qo_indptr = qi, .kv_indptr = qi, .num_qo_heads = kHeads, .num_kv_heads = kHeads,
                .head_dim_qk = d, .options = opts});
        add("ragged" + suffix,
            timer.time([&] { w.run(q, k, v, out, standalone); }, 3, std::max(args.runs, 20), true));
      }
      {
        // The same K/V as a paged cache (pages in shuffled order).
        const std::int64_t pages_per = (s.len + kPage - 1) / kPage, num_pages = pages_per * s.batch;
        std::vector<std::int32_t> pindptr{0}, last, ids(static_cast<std::size_t>(num_pages));
        for (std::int64_t b = 0; b < s.batch; ++b) {
          pindptr.push_back(pindptr.back() + std::int32_t(pages_per));
          last.push_back(std::int32_t(s.len - (pages_per - 1) * kPage));
        }
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
        Tensor cache = Tensor::empty({num_pages, 2, kPage, kHeads, d}, DType::kBF16, gpu);
        fill_random_uniform(cache.data(), std::size_t(cache.numel()), RandomKind::kBF16, seed++);
        const Tensor qi = host_i32(indptr), pi = host_i32(pindptr), li = host_i32(last), ix = host_i32(ids).to(gpu);
        BatchPrefillWithPagedKVCache w(gpu);
        w.plan({.qo_indptr = qi, .page_table = {pi, ix, li}, .num_qo_heads = kHeads, .num_kv_heads = kHeads,
                .head_dim = d, .page_size = kPage, .options = opts});
        const PagedKVCache kv = PagedKVCache::combined(cache);
        add("paged16" + suffix,
            timer.time([&] { w.run(q, kv, out, standalone); }, 3, std::max(args.runs, 20), true));
      }
    }
  }
  report.meta()["target"] = "ragged >= torch SDPA flash (FA2) TFLOP/s; paged16 >= 90% of ragged";
  report.finish(args, {"name", "wrapper", "median_us", "TFLOPs", "frac_gemm"});
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_prefill: %s\n", e.what());
  return 1;
}
