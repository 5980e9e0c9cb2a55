// SPDX-License-Identifier: Apache-2.0
// MLA paged decode on the GPU (PERF.md): DeepSeek's latent cache (ckv 512 + kpe 64),
// page 64, batch 128, 4k and 8k keys per request, 16 and 128 heads; bf16 (and fp8 e4m3
// KV at 16 heads, and at 128 heads over 4k). With 16 heads a key row serves 16 query
// rows: memory-bound (target >= 80% of the read bandwidth); with 128 heads
// compute-bound (target >= 500 TFLOP/s).
// Reports both rates against the read bandwidth and the bf16 GEMM rate of the same run.
// Each shape is a test case description (tests/testing: MLACase); --check runs it
// through the test harness against the float64 oracle before it is timed.
#include <algorithm>
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

constexpr std::int64_t kDc = kMlaHeadDimCkv, kDp = kMlaHeadDimKpe, kPage = 64;

RandomKind random_kind(DType t) {
  return t == DType::kF16 ? RandomKind::kF16 : RandomKind::kBF16;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(
      argc, argv,
      {.description = "MLA paged decode on the GPU (DeepSeek's latent cache): GB/s and TFLOP/s against the "
                      "ceilings of the same run",
       .has_check = kHaveCheck});
  Report report = gpu_report("mla");
  const Ceiling read = measure_read_bandwidth();
  const Ceiling gemm = measure_gemm_bf16();
  report.meta()["ceilings"] = {{"read_bandwidth", to_json(read)}, {"gemm_bf16", to_json(gemm)}};
  const Device gpu = Device::cuda(0);
  GpuTimer timer;

  struct Shape {
    std::int64_t batch, kv, heads;
    DType kv_dtype;
  };
  std::vector<Shape> shapes = {{128, 4096, 16, DType::kBF16},  {128, 8192, 16, DType::kBF16},
                               {128, 4096, 128, DType::kBF16}, {128, 8192, 128, DType::kBF16},
                               {128, 4096, 16, DType::kE4M3},  {128, 8192, 16, DType::kE4M3},
                               {128, 4096, 128, DType::kE4M3}};
  if (args.quick) shapes.resize(1);
  bool all_ok = true;
  for (const Shape& shape : shapes) {
    testing::MLACase s =
        mla_decode_case(std::to_string(shape.batch) + " x " + std::to_string(shape.kv / 1024) + "k H" +
                            std::to_string(shape.heads) + (shape.kv_dtype == DType::kBF16 ? "" : " fp8"),
                        std::vector<std::int32_t>(std::size_t(shape.batch), std::int32_t(shape.kv)),
                        shape.heads, kPage, shape.kv_dtype);
    s.sm_scale = 0.0721f;
    const std::string& name = s.name;
    if (!args.selected(name)) continue;
    const nlohmann::json check = check_field(args, s, gpu, all_ok, 20);
    const std::int64_t batch = shape.batch, heads = shape.heads;
    const HostPageTable table = make_page_table(s.kv_lens, kPage, 3);
    const std::int64_t num_pages = table.num_pages();
    std::vector<std::int32_t> qo_indptr{0};
    for (std::int64_t b = 0; b < batch; ++b) qo_indptr.push_back(std::int32_t(b + 1));
    Tensor cache = Tensor::empty({num_pages, kPage, kDc + kDp}, s.kv_dtype, gpu);
    // fp8: random bits (a few are NaN, which changes no timing); 16-bit: uniform values.
    if (dtype_size(s.kv_dtype) == 1) {
      fill_random_bits(cache.data(), cache.nbytes(), 1);
    } else {
      fill_random_uniform(cache.data(), std::size_t(cache.numel()), random_kind(s.kv_dtype), 1);
    }
    Tensor q_nope = Tensor::empty({batch, heads, kDc}, DType::kBF16, gpu);
    Tensor q_pe = Tensor::empty({batch, heads, kDp}, DType::kBF16, gpu);
    Tensor out = Tensor::empty({batch, heads, kDc}, DType::kBF16, gpu);
    fill_random_uniform(q_nope.data(), std::size_t(q_nope.numel()), RandomKind::kBF16, 2);
    fill_random_uniform(q_pe.data(), std::size_t(q_pe.numel()), RandomKind::kBF16, 3);
    const Tensor t_qo = host_i32(qo_indptr), t_kv = host_i32(table.indptr), t_len = host_i32(s.kv_lens);
    const Tensor t_ids = host_i32(table.indices).to(gpu);

    BatchMLAPagedAttention mla(gpu);
    MLAPlanArgs plan_args = testing::mla_plan_args(t_qo, t_kv, t_ids, t_len, heads, kPage, s.sm_scale);
    plan_args.kv_dtype = s.kv_dtype;
    mla.plan(plan_args);
    const MLACache cache_view = MLACache::combined(cache, kDc);
    const Timing t = timer.time([&] { mla.run(q_nope, q_pe, cache_view, out, {.stream = timer.stream()}); },
                                3, std::max(args.runs, 20), true);
    const double kv_bytes = mla_kv_bytes(s), qo_bytes = mla_qo_bytes(s), flops = mla_flops(s);
    const double gbps = (kv_bytes + qo_bytes) / (t.median_us * 1e3);
    const double tflops = flops / (t.median_us * 1e6);
    nlohmann::json row = {{"name", name},
                          {"batch", batch},
                          {"kv_len", shape.kv},
                          {"heads", heads},
                          {"kv_dtype", dtype_name(s.kv_dtype)},
                          {"us", t.median_us},
                          {"p10_us", t.p10_us},
                          {"p90_us", t.p90_us},
                          {"gbps", gbps},
                          {"of_read", gbps / read.value},
                          {"tflops", tflops},
                          {"of_gemm", gemm.value > 0 ? tflops / gemm.value : 0.0}};
    if (!check.is_null()) row["check"] = check;
    report.add_row(std::move(row));
  }
  report.meta()["target"] = "memory-bound >= 80% of read bandwidth; compute-bound >= 500 TFLOP/s";
  report.finish(args, {"name", "us", "gbps", "of_read", "tflops", "of_gemm"});
  return all_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_mla: %s\n", e.what());
  return 1;
}
