// SPDX-License-Identifier: Apache-2.0
// MLA paged decode on the GPU (PERF.md): DeepSeek's latent cache (ckv 512 + kpe 64),
// page 64, batch 128, 4k and 8k keys per request, 16 and 128 heads; bf16 (and fp8 e4m3
// KV at 16 heads). With 16 heads a key row serves 16 query rows: memory-bound (target
// >= 80% of the read bandwidth); with 128 heads compute-bound (target >= 500 TFLOP/s).
// Reports both rates against the read bandwidth and the bf16 GEMM rate of the same run.
#include <algorithm>
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

constexpr std::int64_t kDc = kMlaHeadDimCkv, kDp = kMlaHeadDimKpe, kPage = 64;

RandomKind random_kind(DType t) {
  return t == DType::kF16 ? RandomKind::kF16 : RandomKind::kBF16;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(argc, argv);
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_mla: no GPU\n");
    return 1;
  }
  Report report("mla");
  report.meta()["device"] = to_json(device_info());
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
                               {128, 4096, 16, DType::kE4M3},  {128, 8192, 16, DType::kE4M3}};
  if (args.quick) shapes.resize(1);
  for (const Shape& s : shapes) {
    const std::string name = std::to_string(s.batch) + " x " + std::to_string(s.kv / 1024) + "k H" +
                             std::to_string(s.heads) + (s.kv_dtype == DType::kBF16 ? "" : " fp8");
    if (!args.selected(name)) continue;
    const std::int64_t pages_per_request = s.kv / kPage, num_pages = s.batch * pages_per_request;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(num_pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(3));
    std::vector<std::int32_t> qo_indptr{0}, kv_indptr{0}, kv_len;
    for (std::int64_t b = 0; b < s.batch; ++b) {
      qo_indptr.push_back(std::int32_t(b + 1));
      kv_indptr.push_back(std::int32_t((b + 1) * pages_per_request));
      kv_len.push_back(std::int32_t(s.kv));
    }
    Tensor cache = Tensor::empty({num_pages, kPage, kDc + kDp}, s.kv_dtype, gpu);
    // fp8: random bits (a few are NaN, which changes no timing); 16-bit: uniform values.
    if (dtype_size(s.kv_dtype) == 1) {
      fill_random_bits(cache.data(), cache.nbytes(), 1);
    } else {
      fill_random_uniform(cache.data(), std::size_t(cache.numel()), random_kind(s.kv_dtype), 1);
    }
    Tensor q_nope = Tensor::empty({s.batch, s.heads, kDc}, DType::kBF16, gpu);
    Tensor q_pe = Tensor::empty({s.batch, s.heads, kDp}, DType::kBF16, gpu);
    Tensor out = Tensor::empty({s.batch, s.heads, kDc}, DType::kBF16, gpu);
    fill_random_uniform(q_nope.data(), std::size_t(q_nope.numel()), RandomKind::kBF16, 2);
    fill_random_uniform(q_pe.data(), std::size_t(q_pe.numel()), RandomKind::kBF16, 3);
    const Tensor t_qo = host_i32(qo_indptr), t_kv = host_i32(kv_indptr), t_len = host_i32(kv_len);
    const Tensor t_ids = host_i32(ids).to(gpu);

    BatchMLAPagedAttention mla(gpu);
    mla.plan({.qo_indptr = t_qo,
              .kv_indptr = t_kv,
              .kv_indices = t_ids,
              .kv_len = t_len,
              .num_heads = s.heads,
              .page_size = kPage,
              .sm_scale = 0.0721f,
              .kv_dtype = s.kv_dtype});
    const MLACache cache_view = MLACache::combined(cache, kDc);
    const Timing t = timer.time([&] { mla.run(q_nope, q_pe, cache_view, out, {.stream = timer.stream()}); },
                                3, std::max(args.runs, 20), true);
    const double kv_bytes = double(s.batch * s.kv) * double(kDc + kDp) * double(dtype_size(s.kv_dtype));
    const double qo_bytes = double(s.batch * s.heads) * double(2 * kDc + kDp) * 2.0;
    const double flops = 2.0 * double(s.batch * s.heads * s.kv) * double(kDc + kDp + kDc);
    const double gbps = (kv_bytes + qo_bytes) / (t.median_us * 1e3);
    const double tflops = flops / (t.median_us * 1e6);
    report.add_row({{"name", name},
                    {"batch", s.batch},
                    {"kv_len", s.kv},
                    {"heads", s.heads},
                    {"kv_dtype", dtype_name(s.kv_dtype)},
                    {"us", t.median_us},
                    {"p10_us", t.p10_us},
                    {"p90_us", t.p90_us},
                    {"gbps", gbps},
                    {"of_read", gbps / read.value},
                    {"tflops", tflops},
                    {"of_gemm", gemm.value > 0 ? tflops / gemm.value : 0.0}});
  }
  report.meta()["target"] = "memory-bound >= 80% of read bandwidth; compute-bound >= 500 TFLOP/s";
  report.finish(args, {"name", "us", "gbps", "of_read", "tflops", "of_gemm"});
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_mla: %s\n", e.what());
  return 1;
}
