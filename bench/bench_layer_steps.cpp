// SPDX-License-Identifier: Apache-2.0
// A decode step through a model's layers, as a serving engine runs it: per layer,
// append each request's new token to that layer's paged cache, then decode over the
// cache (Hq 32 / Hk 8, d 128, page 16, bf16, pages shuffled; 8 layers, each with its
// own cache). The layers run back to back on one stream and are timed as one
// sequence (cold L2 before it), with programmatic dependent launch
// (RunOptions::enable_pdl) and without: the difference is the launch gap the
// overlap hides between kernels, which standalone timings do not see. Also the
// decodes alone, back to back.
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
#include "kvinfer/ops/page.hpp"

using namespace kvinfer;
using namespace kvinfer::bench;

namespace {

constexpr std::int64_t kHq = 32, kHk = 8, kD = 128, kPage = 16;
constexpr int kLayers = 8;

// One batch of `batch` requests of `len` tokens each (the newest one included),
// its page table, and per layer a cache, the new token's K and V, q and out.
struct Step {
  std::int64_t batch = 0, len = 0;
  Tensor indptr_host, last_host, indptr, last, indices, batch_indices, positions;
  std::vector<Tensor> caches, keys, values, qs, outs;
  std::vector<BatchDecodeWithPagedKVCache> decodes;
  double kv_bytes = 0;  // per layer
};

Step make_step(std::int64_t batch, std::int64_t len, std::uint64_t seed) {
  Step s;
  s.batch = batch;
  s.len = len;
  const Device gpu = Device::cuda(0);
  // One layer's decode as the tests describe it; every layer has the same shape.
  const testing::AttentionCase c =
      decode_case("", std::vector<std::int32_t>(std::size_t(batch), std::int32_t(len)), kHq, kHk, kD, kPage);
  const HostPageTable table = make_page_table(c.kv_lens, kPage, seed);  // a serving pool's order
  const std::int64_t pages = table.num_pages();
  std::vector<std::int32_t> bi, pos;
  for (std::int64_t b = 0; b < batch; ++b) {
    bi.push_back(std::int32_t(b));
    pos.push_back(std::int32_t(len - 1));  // the new token is the request's last
  }
  s.indptr_host = host_i32(table.indptr);
  s.last_host = host_i32(table.last_page_len);
  s.indptr = s.indptr_host.to(gpu);
  s.last = s.last_host.to(gpu);
  s.indices = host_i32(table.indices).to(gpu);
  s.batch_indices = host_i32(bi).to(gpu);
  s.positions = host_i32(pos).to(gpu);
  for (int l = 0; l < kLayers; ++l) {
    s.caches.push_back(Tensor::empty({pages, 2, kPage, kHk, kD}, DType::kBF16, gpu));
    fill_random_uniform(s.caches.back().data(), std::size_t(s.caches.back().numel()), RandomKind::kBF16,
                        seed + l);
    for (auto* v : {&s.keys, &s.values}) {
      v->push_back(Tensor::empty({batch, kHk, kD}, DType::kBF16, gpu));
      fill_random_uniform(v->back().data(), std::size_t(v->back().numel()), RandomKind::kBF16,
                          seed + 100 + l);
    }
    s.qs.push_back(Tensor::empty({batch, kHq, kD}, DType::kBF16, gpu));
    fill_random_uniform(s.qs.back().data(), std::size_t(s.qs.back().numel()), RandomKind::kBF16,
                        seed + 200 + l);
    s.outs.push_back(Tensor::empty({batch, kHq, kD}, DType::kBF16, gpu));
    s.decodes.emplace_back(gpu);
    s.decodes.back().plan({.page_table = {s.indptr_host, s.indices, s.last_host},
                           .num_qo_heads = kHq,
                           .num_kv_heads = kHk,
                           .head_dim = kD,
                           .page_size = kPage});
  }
  s.kv_bytes = attention_kv_bytes(c);
  return s;
}

// Enqueues the step's layers: append then decode per layer, or decode alone.
void run_layers(Step& s, bool append, bool pdl, Stream stream) {
  const PageTable table{s.indptr, s.indices, s.last};
  for (int l = 0; l < kLayers; ++l) {
    const PagedKVCache kv = PagedKVCache::combined(s.caches[std::size_t(l)]);
    if (append) {
      append_paged_kv_cache(s.keys[std::size_t(l)], s.values[std::size_t(l)], s.batch_indices, s.positions,
                            kv, table, stream);
    }
    s.decodes[std::size_t(l)].run(s.qs[std::size_t(l)], kv, s.outs[std::size_t(l)],
                                  {.stream = stream, .enable_pdl = pdl});
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(
      argc, argv,
      {.description = "A decode step through 8 layers (append, then decode, per layer), with and without "
                      "programmatic dependent launch"});
  Report report = gpu_report("layer_steps");
  report.meta()["layers"] = kLayers;
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {1, 1024}, {16, 1024}, {64, 1024}, {16, 8192}, {64, 4096}};
  if (args.quick) shapes.resize(2);
  GpuTimer timer;
  std::uint64_t seed = 1;
  for (auto [batch, len] : shapes) {
    const std::string shape = std::to_string(batch) + "x" + std::to_string(len);
    if (!args.selected(shape)) continue;
    Step s = make_step(batch, len, seed += 1000);
    for (bool append : {true, false}) {
      double off_us = 0;
      for (bool pdl : {false, true}) {
        const Timing t =
            timer.time([&] { run_layers(s, append, pdl, timer.stream()); }, 3, std::max(args.runs, 20));
        const double per_layer = t.median_us / kLayers;
        if (!pdl) off_us = per_layer;
        const std::string name = shape + (append ? " append+decode" : " decode") + (pdl ? " pdl" : "");
        report.add_row({{"name", name},
                        {"batch", batch},
                        {"kv_len", len},
                        {"append", append},
                        {"enable_pdl", pdl},
                        {"layers", kLayers},
                        {"median_us", t.median_us},
                        {"p10_us", t.p10_us},
                        {"p90_us", t.p90_us},
                        {"us_per_layer", per_layer},
                        {"saved_us_per_layer", pdl ? off_us - per_layer : 0.0},
                        {"decode_kv_GBps", s.kv_bytes / (per_layer * 1e3)}});
      }
    }
  }
  report.meta()["what"] = "per layer: append one token per request, then decode; pdl: RunOptions::enable_pdl";
  report.finish(args, {"name", "median_us", "us_per_layer", "saved_us_per_layer", "decode_kv_GBps"});
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_layer_steps: %s\n", e.what());
  return 1;
}
