// SPDX-License-Identifier: Apache-2.0
// CPU attention throughput next to the memory read bandwidth measured in the same
// run (PERF.md, CPU decode: paged decode >= 50% of the read bandwidth): a streaming
// sum over >= 1 GiB with every thread, paged decode (bf16 KV, Hq 32 / Hk 8, d 128,
// page 16, batch 16 x 4k, pages shuffled; also 1 x 32k and 64 x 1k) taking turns with
// it, and ragged prefill (causal and not, GFLOP/s).
//
// The shapes are the tests' case descriptions (bench/common/cases.hpp); --check runs
// each through the test harness against the float64 oracle first.
//
//   bench_cpu_attention [--json PATH] [--runs N] [--quick] [--filter TEXT] [--check] [--read-gib G]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench/common/args.hpp"
#include "bench/common/case_metrics.hpp"
#include "bench/common/cases.hpp"
#include "bench/common/page_table.hpp"
#include "cpu/isa.hpp"
#include "cpu/thread_pool.hpp"
#include "kvinfer/kvinfer.hpp"

using namespace kvinfer;
using namespace kvinfer::bench;

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double time_once(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Times fn() `runs` times after one warm-up; returns the seconds of each run.
template <class Fn>
std::vector<double> time_runs(int runs, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return t;
}

// splitmix64: fast random bits for large buffers.
struct SplitMix {
  std::uint64_t x;
  std::uint64_t next() {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

// Random bf16 values, roughly normal (a sum of uniforms), filled by every thread.
void fill_bf16(const Tensor& t, std::uint64_t seed) {
  auto* p = t.data_as<std::uint16_t>();
  const std::int64_t n = t.numel();
  const int parts = cpu::num_threads() * 4;
  cpu::parallel_for(parts, [&](std::int64_t part) {
    SplitMix rng{seed * 1000003 + std::uint64_t(part)};
    const std::int64_t b = n * part / parts, e = n * (part + 1) / parts;
    for (std::int64_t i = b; i < e; ++i) {
      const std::uint64_t r = rng.next();
      const float u = float(r & 0xFFFF) + float((r >> 16) & 0xFFFF) + float((r >> 32) & 0xFFFF) - 98302.5f;
      p[i] = f32_to_bf16(u / 32768.0f);
    }
  });
}

// --------------------------------------------------------------- read ceiling
// A streaming sum over a buffer far larger than the caches, split into one
// contiguous part per thread: what a kernel that reads each byte once can reach.
class ReadCeiling {
 public:
  explicit ReadCeiling(double gib)
      : n_(std::int64_t(gib * double(1ll << 30)) / 8), buf_(static_cast<std::size_t>(n_)) {
    const int threads = cpu::num_threads();
    cpu::parallel_for(threads, [&](std::int64_t t) {
      for (std::int64_t i = n_ * t / threads; i < n_ * (t + 1) / threads; ++i)
        buf_[std::size_t(i)] = std::uint64_t(i) * 7;
    });
  }
  double bytes() const { return double(n_) * 8; }
  void run() {
    const int threads = cpu::num_threads();
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(threads));
    cpu::parallel_for(threads, [&](std::int64_t t) {
      const std::uint64_t* p = buf_.data();
      const std::int64_t b = n_ * t / threads, e = n_ * (t + 1) / threads;
      // Eight independent integer sums: vectorised, and integer addition needs no
      // fast-math to be reordered.
      std::uint64_t acc[8] = {};
      std::int64_t i = b;
      for (; i + 8 <= e; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
      for (; i < e; ++i) acc[0] += p[i];
      sums[std::size_t(t)] = std::accumulate(acc, acc + 8, std::uint64_t(0));
    });
    sink_ += std::accumulate(sums.begin(), sums.end(), std::uint64_t(0));
  }

 private:
  std::int64_t n_;
  std::vector<std::uint64_t> buf_;
  std::uint64_t sink_ = 0;
};

// --------------------------------------------------------------- paged decode
testing::AttentionCase decode_shape(std::int64_t batch, std::int32_t kv_len) {
  return decode_case(fmt::format("decode B{} L{}", batch, kv_len),
                     std::vector<std::int32_t>(std::size_t(batch), kv_len), 32, 8, 128, 16);
}

class DecodeCase {
 public:
  explicit DecodeCase(const testing::AttentionCase& c) : c_(c) {
    // A serving system's pool leaves each request's pages scattered: shuffled.
    table_ = make_page_table(c.kv_lens, c.page_size, 7);
    const auto batch = std::int64_t(c.kv_lens.size());
    cache_ = Tensor::empty({table_.num_pages(), 2, c.page_size, c.num_kv_heads, c.head_dim_qk}, DType::kBF16);
    q_ = Tensor::empty({batch, c.num_qo_heads, c.head_dim_qk}, DType::kBF16);
    out_ = Tensor::empty({batch, c.num_qo_heads, c.head_dim_vo}, DType::kBF16);
    fill_bf16(cache_, 1);
    fill_bf16(q_, 2);
    const PageTable table{TensorView(table_.indptr.data(), DType::kI32, {batch + 1}),
                          TensorView(table_.indices.data(), DType::kI32, {table_.num_pages()}),
                          TensorView(table_.last_page_len.data(), DType::kI32, {batch})};
    w_.plan({.page_table = table,
             .num_qo_heads = c.num_qo_heads,
             .num_kv_heads = c.num_kv_heads,
             .head_dim = c.head_dim_qk,
             .page_size = c.page_size});
    run();  // warm-up
  }
  void run() { w_.run(q_, PagedKVCache::combined(cache_), out_); }
  double bytes() const { return attention_kv_bytes(c_) + attention_qo_bytes(c_); }
  double flops() const { return attention_flops(c_); }
  const testing::AttentionCase& shape() const { return c_; }

 private:
  testing::AttentionCase c_;
  HostPageTable table_;
  Tensor cache_, q_, out_;
  BatchDecodeWithPagedKVCache w_;
};

// --------------------------------------------------------------- ragged prefill
testing::AttentionCase prefill_shape(std::int64_t batch, std::int32_t len, bool causal) {
  return prefill_case(fmt::format("prefill {}x{} {}", batch, len, causal ? "causal" : "full"),
                      testing::Wrapper::kRaggedPrefill, batch, len, 32, 8, 128, causal);
}

nlohmann::json bench_prefill(const testing::AttentionCase& c, int runs) {
  const auto batch = std::int64_t(c.qo_lens.size());
  const std::int64_t len = c.qo_lens[0], nnz = total_qo_len(c), hq = c.num_qo_heads, hk = c.num_kv_heads,
                     d = c.head_dim_qk;
  const bool causal = c.options.mask_mode == MaskMode::kCausal;
  std::vector<std::int32_t> indptr;
  for (std::int64_t b = 0; b <= batch; ++b) indptr.push_back(std::int32_t(b * len));
  Tensor q = Tensor::empty({nnz, hq, d}, DType::kBF16), out = Tensor::empty({nnz, hq, d}, DType::kBF16);
  Tensor k = Tensor::empty({nnz, hk, d}, DType::kBF16), v = Tensor::empty({nnz, hk, d}, DType::kBF16);
  fill_bf16(q, 3);
  fill_bf16(k, 4);
  fill_bf16(v, 5);
  const TensorView ind(indptr.data(), DType::kI32, {batch + 1});
  BatchPrefillWithRaggedKVCache w;
  w.plan({.qo_indptr = ind,
          .kv_indptr = ind,
          .num_qo_heads = hq,
          .num_kv_heads = hk,
          .head_dim_qk = d,
          .options = c.options});
  const std::vector<double> t = time_runs(runs, [&] { w.run(q, k, v, out); });
  const double sec = median(t);
  const double flops = attention_flops(c);
  return {{"name", c.name},
          {"op", "ragged_prefill"},
          {"shape", fmt::format("bf16, Hq {} / Hk {}, d {}, {} x {} tokens, {}", hq, hk, d, batch, len,
                                causal ? "causal" : "no mask")},
          {"ms", sec * 1e3},
          {"ms_best", *std::min_element(t.begin(), t.end()) * 1e3},
          {"flops", flops},
          {"gflops", flops / sec / 1e9}};
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

}  // namespace

int main(int argc, char** argv) try {
  double read_gib = 1.0;
  const Args args = parse_args(
      argc, argv,
      {.description = "CPU attention throughput (paged decode, ragged prefill) next to the memory read "
                      "bandwidth measured in the same run",
       .defaults = {.runs = 10},
       .has_check = kHaveCheck,
       .extra = [&](CLI::App& app) {
         app.add_option("--read-gib", read_gib,
                        "GiB streamed by the read ceiling (at least 1 unless --quick)")
             ->check(CLI::Range(0.01, 64.0))
             ->capture_default_str();
       }});
  std::vector<testing::AttentionCase> decode_cases, prefill_cases;
  for (auto [b, l] :
       args.quick ? std::vector<std::pair<std::int64_t, std::int32_t>>{{4, 1024}}
                  : std::vector<std::pair<std::int64_t, std::int32_t>>{{16, 4096}, {1, 32768}, {64, 1024}}) {
    decode_cases.push_back(decode_shape(b, l));
  }
  for (auto [b, l, causal] :
       args.quick
           ? std::vector<std::tuple<std::int64_t, std::int32_t, bool>>{{1, 256, true}}
           : std::vector<std::tuple<std::int64_t, std::int32_t, bool>>{{2, 1024, true}, {2, 1024, false}}) {
    prefill_cases.push_back(prefill_shape(b, l, causal));
  }
  for (auto* cases : {&decode_cases, &prefill_cases}) {
    std::erase_if(*cases, [&](const testing::AttentionCase& c) { return !args.selected(c.name); });
  }
  // --check: the same descriptions through the test harness, against the oracle.
  std::map<std::string, CheckResult> checks;
  if constexpr (kHaveCheck) {
    if (args.check) {
      for (const auto* cases : {&decode_cases, &prefill_cases}) {
        for (const testing::AttentionCase& c : *cases) {
          const CheckResult r = check_case(c, Device::cpu());
          fmt::print("check {:<24} {} {}\n", c.name, r.ok ? "ok" : "FAILED", r.summary);
          checks.emplace(c.name, r);
        }
      }
    }
  }
  nlohmann::json report;
  report["bench"] = "bench_cpu_attention";
  report["device"] = {{"cpu", cpu_model()},
                      {"threads", cpu::num_threads()},
                      {"hardware_threads", std::thread::hardware_concurrency()},
                      {"isa", std::string(cpu::cpu_isa_name(cpu::cpu_isa()))}};
  report["date"] = today();
  fmt::print("CPU: {} | threads {} | ISA {}\n", cpu_model(), cpu::num_threads(),
             cpu::cpu_isa_name(cpu::cpu_isa()));

  // The ceiling and the decode cases take turns, round after round, so that both
  // see the same machine (a shared machine's load changes from second to second);
  // the fraction compares their medians.
  ReadCeiling ceiling(args.quick ? 0.25 : std::max(1.0, read_gib));
  std::vector<std::unique_ptr<DecodeCase>> decode;
  for (const testing::AttentionCase& c : decode_cases) decode.push_back(std::make_unique<DecodeCase>(c));
  ceiling.run();
  const int rounds = args.quick ? 3 : std::max(args.runs, 5);
  std::vector<double> read_s;
  std::vector<std::vector<double>> decode_s(decode.size());
  for (int r = 0; r < rounds; ++r) {
    read_s.push_back(time_once([&] { ceiling.run(); }));
    for (std::size_t c = 0; c < decode.size(); ++c)
      decode_s[c].push_back(time_once([&] { decode[c]->run(); }));
  }
  const double read_gbps = ceiling.bytes() / median(read_s) / 1e9;
  const double read_best = ceiling.bytes() / *std::min_element(read_s.begin(), read_s.end()) / 1e9;
  report["ceilings"] = {{"read_gbps", read_gbps},
                        {"read_gbps_best", read_best},
                        {"read_bytes", ceiling.bytes()},
                        {"rounds", rounds}};
  fmt::print(
      "read bandwidth (streaming sum over {:.2f} GiB, {} rounds): {:.2f} GB/s median, {:.2f} GB/s best\n",
      ceiling.bytes() / double(1ll << 30), rounds, read_gbps, read_best);

  std::vector<nlohmann::json> rows;
  const auto with_check = [&](nlohmann::json row) {
    if (const auto it = checks.find(row["name"].get<std::string>()); it != checks.end()) {
      row["check"] = {{"ok", it->second.ok}, {"summary", it->second.summary}};
    }
    return row;
  };
  for (std::size_t c = 0; c < decode.size(); ++c) {
    const testing::AttentionCase& s = decode[c]->shape();
    const double sec = median(decode_s[c]);
    const double best = *std::min_element(decode_s[c].begin(), decode_s[c].end());
    const double gbps = decode[c]->bytes() / sec / 1e9;
    rows.push_back(with_check(
        {{"name", s.name},
         {"op", "paged_decode"},
         {"shape", fmt::format("bf16 KV, Hq {} / Hk {}, d {}, page {}, batch {} x {}", s.num_qo_heads,
                               s.num_kv_heads, s.head_dim_qk, s.page_size, s.kv_lens.size(), s.kv_lens[0])},
         {"ms", sec * 1e3},
         {"ms_best", best * 1e3},
         {"bytes", decode[c]->bytes()},
         {"gbps", gbps},
         {"gbps_best", decode[c]->bytes() / best / 1e9},
         {"gflops", decode[c]->flops() / sec / 1e9},
         {"fraction_of_read", gbps / read_gbps}}));
  }
  decode.clear();
  const int runs = args.quick ? 2 : args.runs;
  for (const testing::AttentionCase& c : prefill_cases)
    rows.push_back(with_check(bench_prefill(c, std::max(1, runs / 3))));

  fmt::print("{:<24} {:>10} {:>10} {:>10} {:>12}\n", "case", "ms", "GB/s", "GFLOP/s", "of read bw");
  for (const auto& r : rows) {
    const std::string gbps = r.contains("gbps") ? fmt::format("{:.2f}", r["gbps"].get<double>()) : "-";
    const std::string frac = r.contains("fraction_of_read")
                                 ? fmt::format("{:.0f}%", 100 * r["fraction_of_read"].get<double>())
                                 : "-";
    fmt::print("{:<24} {:>10.2f} {:>10} {:>10.2f} {:>12}\n", r["name"].get<std::string>(),
               r["ms"].get<double>(), gbps, r["gflops"].get<double>(), frac);
  }
  report["rows"] = rows;
  if (!args.json_path.empty()) {
    std::ofstream f(args.json_path);
    f << report.dump(2) << "\n";
    if (!f) throw std::runtime_error("cannot write " + args.json_path);
  }
  for (const auto& [name, r] : checks) {
    if (!r.ok) return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_cpu_attention: %s\n", e.what());
  return 2;
}
