// SPDX-License-Identifier: Apache-2.0
// Paged decode on the GPU: PERF.md's shapes (Hq 32 / Hk 8, d 128, page 16, bf16)
// with equal and skewed lengths, plus group size 1, head_dim 64/256/512, page 1/64,
// HND and fp8 KV, and the equal lengths on a contiguous cache (the peers' layout).
// Reports KV bytes read / time against the read bandwidth measured in the same run.
// Each shape is a test case description (tests/testing); --check runs it through the
// test harness against the float64 oracle before it is timed.
#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/common/case_metrics.hpp"
#include "bench/common/cases.hpp"
#include "bench/common/gpu_json.hpp"
#include "bench/common/gpu_report.hpp"
#include "bench/common/page_table.hpp"
#include "bench/common/report.hpp"
#include "bench/common/warp_timeline.hpp"
#include "kvinfer/kvinfer.hpp"

using namespace kvinfer;
using namespace kvinfer::bench;

namespace {

// A decode case of the tests' description, with how the benchmark lays its pages out.
struct DecodeShape {
  testing::AttentionCase c;  // kv_lens, heads, head_dim, page_size, layout, kv_dtype, split; kv pair:
                             // !combined_cache
  bool shuffled = true;      // pages in a serving pool's random order, else in order
};

DecodeShape equal(std::int64_t batch, std::int32_t len) {
  return {decode_case(std::to_string(batch) + "x" + std::to_string(len),
                      std::vector<std::int32_t>(std::size_t(batch), len), 32, 8, 128, 16)};
}

DecodeShape skewed(std::int64_t batch, std::int32_t len) {
  DecodeShape s{decode_case(std::to_string(batch) + "x" + std::to_string(len) + " skewed",
                            std::vector<std::int32_t>(std::size_t(batch), 1), 32, 8, 128, 16)};
  s.c.kv_lens[0] = std::int32_t(batch * len - batch + 1);
  return s;
}

struct Setup {
  Tensor cache, v_cache, q, out;
  PageTableTensors table;
  PagedKVCache kv;
  double kv_bytes = 0;
};

Setup make_setup(const DecodeShape& shape, std::uint64_t seed) {
  const testing::AttentionCase& s = shape.c;
  Setup st;
  const auto batch = std::int64_t(s.kv_lens.size());
  const Device gpu = Device::cuda(0);
  const HostPageTable table = make_page_table(
      s.kv_lens, s.page_size, shape.shuffled ? std::optional<std::uint64_t>(seed) : std::nullopt);
  const std::int64_t num_pages = table.num_pages();
  st.table = to_tensors(table, gpu);
  const std::int64_t ps = s.page_size, h = s.num_kv_heads, d = s.head_dim_qk;
  const auto shape_of = [&](std::vector<std::int64_t> kv) {
    std::vector<std::int64_t> dims{num_pages};
    dims.insert(dims.end(), kv.begin(), kv.end());
    if (s.layout == KVLayout::kNHD)
      dims.insert(dims.end(), {ps, h, d});
    else
      dims.insert(dims.end(), {h, ps, d});
    return dims;
  };
  const auto fill = [&](Tensor& t, std::uint64_t fill_seed) {
    // Random bits as KV: fp8/bf16 NaNs would only slow nothing down, but keep values sane.
    fill_random_uniform(t.data(), std::size_t(t.nbytes() / 2),
                        s.kv_dtype == DType::kBF16 ? RandomKind::kBF16 : RandomKind::kF16, fill_seed);
    if (is_fp8(s.kv_dtype)) fill_random_bits(t.data(), t.nbytes(), fill_seed);
  };
  if (!s.combined_cache) {
    st.cache = Tensor::empty(shape_of({}), s.kv_dtype, gpu);
    st.v_cache = Tensor::empty(shape_of({}), s.kv_dtype, gpu);
    fill(st.cache, seed);
    fill(st.v_cache, seed + 2);
    st.kv = PagedKVCache::pair(st.cache, st.v_cache, s.layout);
  } else {
    st.cache = Tensor::empty(shape_of({2}), s.kv_dtype, gpu);
    fill(st.cache, seed);
    st.kv = PagedKVCache::combined(st.cache, s.layout);
  }
  st.q = Tensor::empty({batch, s.num_qo_heads, d}, DType::kBF16, gpu);
  fill_random_uniform(st.q.data(), std::size_t(st.q.numel()), RandomKind::kBF16, seed + 1);
  st.out = Tensor::empty({batch, s.num_qo_heads, d}, DType::kBF16, gpu);
  st.kv_bytes = attention_kv_bytes(s);
  return st;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(
      argc, argv,
      {.description =
           "Paged decode on the GPU: KV bytes read / time against the read bandwidth of the same run",
       .has_check = kHaveCheck});
  Report report = gpu_report("decode");
  const Ceiling read = measure_read_bandwidth();
  report.meta()["ceilings"] = {{"read_bandwidth", to_json(read)}};
  std::printf("read bandwidth: %.0f GB/s (%s)\n", read.value, read.detail.c_str());

  std::vector<DecodeShape> shapes = {equal(1, 32768),  equal(16, 8192),  equal(64, 4096),
                                     equal(128, 2048), equal(256, 1024), equal(64, 16384)};
  for (auto [b, l] : {std::pair{1, 32768}, {16, 8192}, {64, 4096}, {128, 2048}, {256, 1024}, {64, 16384}}) {
    shapes.push_back(skewed(b, l));
  }
  auto variant = [&](std::string what, auto edit) {
    DecodeShape s = equal(64, 4096);
    s.c.name += " " + what;
    edit(s.c);
    shapes.push_back(s);
  };
  using Case = testing::AttentionCase;
  variant("group1", [](Case& c) { c.num_qo_heads = 8; });
  variant("group2", [](Case& c) { c.num_qo_heads = 16; });
  variant("group8", [](Case& c) { c.num_qo_heads = 64; });
  variant("d64", [](Case& c) { c.head_dim_qk = c.head_dim_vo = 64; });
  variant("d256", [](Case& c) { c.head_dim_qk = c.head_dim_vo = 256; });
  variant("d512", [](Case& c) { c.head_dim_qk = c.head_dim_vo = 512; });
  variant("page1", [](Case& c) { c.page_size = 1; });
  variant("page64", [](Case& c) { c.page_size = 64; });
  variant("HND", [](Case& c) { c.layout = KVLayout::kHND; });
  variant("fp8e4m3", [](Case& c) { c.kv_dtype = DType::kE4M3; });
  for (auto [b, l] : {std::pair{1, 32768}, {16, 8192}, {128, 2048}}) {
    DecodeShape s = equal(b, l);
    s.c.name += " fp8e4m3";
    s.c.kv_dtype = DType::kE4M3;
    shapes.push_back(s);
  }
  // fp8 rows are 128 bytes, NHD pages place a head's 16 rows 1 KiB apart: the same
  // problem where a head's rows are one run (HND pages, and the peers' contiguous HND).
  {
    DecodeShape s = equal(16, 8192);
    s.c.name += " fp8e4m3 HND";
    s.c.kv_dtype = DType::kE4M3;
    s.c.layout = KVLayout::kHND;
    shapes.push_back(s);
    s = equal(16, 8192);
    s.c.name += " fp8e4m3 contiguous HND";
    s.c.kv_dtype = DType::kE4M3;
    s.c.layout = KVLayout::kHND;
    s.c.page_size = 8192;
    s.shuffled = false;
    s.c.combined_cache = false;
    shapes.push_back(s);
  }
  // head_dim 256 (the key-row tile) where a request is long or few share the device.
  for (auto [b, l] : {std::pair{1, 32768}, {16, 8192}}) {
    DecodeShape s = equal(b, l);
    s.c.name += " d256";
    s.c.head_dim_qk = s.c.head_dim_vo = 256;
    shapes.push_back(s);
  }
  // The paging's cost: the same problems with the pages in order, and on the peers'
  // layout (one page per request, K and V apart, HND: torch SDPA's [B, Hk, L, D]).
  for (auto [b, l] : {std::pair{1, 32768}, {16, 8192}, {64, 4096}, {128, 2048}, {256, 1024}, {64, 16384}}) {
    DecodeShape s = equal(b, l);
    s.c.name += " pages in order";
    s.shuffled = false;
    shapes.push_back(s);
    s = equal(b, l);
    s.c.name += " contiguous HND";
    s.c.layout = KVLayout::kHND;
    s.c.page_size = l;
    s.shuffled = false;
    s.c.combined_cache = false;
    shapes.push_back(s);
  }
  // The split the planner picks against fixed ones (and none): how much of the gap
  // to the read bandwidth the chunking explains.
  const auto fixed = [&](DecodeShape s, std::int64_t split) {
    s.c.name += split == 0 ? " nosplit" : " split" + std::to_string(split);
    s.c.split = split == 0 ? SplitOptions{.disable_split_kv = true} : SplitOptions{.fixed_split_size = split};
    shapes.push_back(s);
  };
  for (auto [b, l] : {std::pair{1, 32768}, {16, 8192}, {64, 4096}, {128, 2048}, {256, 1024}}) {
    for (std::int64_t split : {0, 512, 2048}) {
      if (split < l && (split > 0 || b > 1)) fixed(equal(b, l), split);
    }
  }
  for (auto [b, l] : {std::pair{16, 8192}, {64, 4096}, {256, 1024}}) {
    for (std::int64_t split : {512, 1024, 2048}) fixed(skewed(b, l), split);
  }
  if (args.quick) shapes.resize(2);
  std::erase_if(shapes, [&](const DecodeShape& s) { return !args.selected(s.c.name); });

  GpuTimer timer;
  // Standalone times: no programmatic launch, so that no run overlaps the L2 flush
  // before it (bench_layer_steps measures what that overlap saves between kernels).
  const RunOptions standalone{.stream = timer.stream(), .enable_pdl = false};
  std::uint64_t seed = 1;
  // A plain read of each case's KV bytes, timed alike: the most a decode of that size
  // can reach (at 134 MB, as for 1 x 32k, launch and ramp-up are a visible part).
  std::map<std::size_t, Ceiling> read_of;
  bool all_ok = true;
  for (const DecodeShape& shape : shapes) {
    const testing::AttentionCase& s = shape.c;
    const nlohmann::json check = check_field(args, s, Device::cuda(0), all_ok, 40);
    Setup st = make_setup(shape, seed++);
    BatchDecodeWithPagedKVCache w(Device::cuda(0), s.layout);
    w.plan({.page_table = st.table.view(),
            .num_qo_heads = s.num_qo_heads,
            .num_kv_heads = s.num_kv_heads,
            .head_dim = s.head_dim_qk,
            .page_size = s.page_size,
            .kv_dtype = s.kv_dtype,
            .split = s.split});
    const Timing t =
        timer.time([&] { w.run(st.q, st.kv, st.out, standalone); }, 5, std::max(args.runs, 20), true);
    // Builds with KVINFER_CUDA_TIMELINE: when the warps stream and finish (on stderr).
    print_warp_timeline(stderr, s.name, double(st.kv_bytes), [&] { w.run(st.q, st.kv, st.out, standalone); });
    const double io = attention_qo_bytes(s);
    const double gbps = (st.kv_bytes + io) / (t.median_us * 1e3);
    const std::size_t kv_bytes = std::size_t(st.kv_bytes);
    if (!read_of.contains(kv_bytes)) read_of.emplace(kv_bytes, measure_read_of(kv_bytes, timer));
    const Ceiling& same = read_of.at(kv_bytes);
    nlohmann::json row = {{"name", s.name},
                          {"batch", s.kv_lens.size()},
                          {"kv_dtype", std::string(dtype_name(s.kv_dtype))},
                          {"layout", std::string(kv_layout_name(s.layout))},
                          {"Hq", s.num_qo_heads},
                          {"Hk", s.num_kv_heads},
                          {"D", s.head_dim_qk},
                          {"page", s.page_size},
                          {"kv_bytes", st.kv_bytes},
                          {"median_us", t.median_us},
                          {"p10_us", t.p10_us},
                          {"p90_us", t.p90_us},
                          {"GBps", gbps},
                          {"frac_read", gbps / read.value},
                          {"read_same_us", same.timing.median_us},
                          {"frac_same_read", same.timing.median_us / t.median_us}};
    if (!check.is_null()) row["check"] = check;
    report.add_row(std::move(row));
  }
  report.meta()["target"] = "KV bytes read / time >= 90% of read bandwidth (equal lengths), >= 80% (skewed)";
  report.finish(args, {"name", "kv_dtype", "median_us", "p10_us", "p90_us", "GBps", "frac_read",
                       "read_same_us", "frac_same_read"});
  return all_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_decode: %s\n", e.what());
  return 1;
}
