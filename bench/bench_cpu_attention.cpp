// SPDX-License-Identifier: Apache-2.0
// CPU attention throughput next to the memory read bandwidth measured in the same
// run (PERF.md, CPU decode: paged decode >= 50% of the read bandwidth): a streaming
// sum over >= 1 GiB with every thread, paged decode (bf16 KV, Hq 32 / Hk 8, d 128,
// page 16, batch 16 x 4k, pages shuffled; also 1 x 32k and 64 x 1k) taking turns with
// it, and ragged prefill (causal and not, GFLOP/s).
//
//   bench_cpu_attention [--json PATH] [--runs N] [--quick] [--read-gib G]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/thread_pool.hpp"
#include "kvinfer/kvinfer.hpp"

using namespace kvinfer;

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string json_path;
  int runs = 10;
  bool quick = false;
  double read_gib = 1.0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(fmt::format("{} needs a value", s));
      return argv[++i];
    };
    if (s == "--json")
      a.json_path = next();
    else if (s == "--runs")
      a.runs = std::max(1, std::stoi(next()));
    else if (s == "--quick")
      a.quick = true;
    else if (s == "--read-gib")
      a.read_gib = std::stod(next());
    else
      throw std::runtime_error(
          fmt::format("unknown argument {} (--json PATH, --runs N, --quick, --read-gib G)", s));
  }
  return a;
}

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
struct DecodeShape {
  std::int64_t batch, kv_len, hq = 32, hk = 8, d = 128, page = 16;
};

class DecodeCase {
 public:
  explicit DecodeCase(const DecodeShape& s) : s_(s) {
    const std::int64_t pages_per_req = (s.kv_len + s.page - 1) / s.page;
    const std::int64_t num_pages = s.batch * pages_per_req;
    // A serving system's pool leaves each request's pages scattered: shuffle them.
    ids_.resize(static_cast<std::size_t>(num_pages));
    std::iota(ids_.begin(), ids_.end(), 0);
    std::shuffle(ids_.begin(), ids_.end(), std::mt19937_64(7));
    indptr_.push_back(0);
    for (std::int64_t b = 0; b < s.batch; ++b) {
      indptr_.push_back(std::int32_t((b + 1) * pages_per_req));
      last_.push_back(std::int32_t(s.kv_len - (pages_per_req - 1) * s.page));
    }
    cache_ = Tensor::empty({num_pages, 2, s.page, s.hk, s.d}, DType::kBF16);
    q_ = Tensor::empty({s.batch, s.hq, s.d}, DType::kBF16);
    out_ = Tensor::empty({s.batch, s.hq, s.d}, DType::kBF16);
    fill_bf16(cache_, 1);
    fill_bf16(q_, 2);
    const PageTable table{TensorView(indptr_.data(), DType::kI32, {s.batch + 1}),
                          TensorView(ids_.data(), DType::kI32, {num_pages}),
                          TensorView(last_.data(), DType::kI32, {s.batch})};
    w_.plan({.page_table = table,
             .num_qo_heads = s.hq,
             .num_kv_heads = s.hk,
             .head_dim = s.d,
             .page_size = s.page});
    run();  // warm-up
  }
  void run() { w_.run(q_, PagedKVCache::combined(cache_), out_); }
  double bytes() const {
    return double(s_.batch * s_.kv_len * s_.hk * s_.d * 2 * 2) + double(q_.nbytes() + out_.nbytes());
  }
  double flops() const { return double(s_.batch * s_.kv_len * s_.hq * s_.d * 2 * 2); }
  const DecodeShape& shape() const { return s_; }

 private:
  DecodeShape s_;
  std::vector<std::int32_t> ids_, indptr_, last_;
  Tensor cache_, q_, out_;
  BatchDecodeWithPagedKVCache w_;
};

// --------------------------------------------------------------- ragged prefill
struct PrefillShape {
  std::int64_t batch, len;
  bool causal;
  std::int64_t hq = 32, hk = 8, d = 128;
};

nlohmann::json bench_prefill(const PrefillShape& s, int runs) {
  const std::int64_t nnz = s.batch * s.len;
  std::vector<std::int32_t> indptr;
  for (std::int64_t b = 0; b <= s.batch; ++b) indptr.push_back(std::int32_t(b * s.len));
  Tensor q = Tensor::empty({nnz, s.hq, s.d}, DType::kBF16),
         out = Tensor::empty({nnz, s.hq, s.d}, DType::kBF16);
  Tensor k = Tensor::empty({nnz, s.hk, s.d}, DType::kBF16), v = Tensor::empty({nnz, s.hk, s.d}, DType::kBF16);
  fill_bf16(q, 3);
  fill_bf16(k, 4);
  fill_bf16(v, 5);
  const TensorView ind(indptr.data(), DType::kI32, {s.batch + 1});
  BatchPrefillWithRaggedKVCache w;
  w.plan({.qo_indptr = ind,
          .kv_indptr = ind,
          .num_qo_heads = s.hq,
          .num_kv_heads = s.hk,
          .head_dim_qk = s.d,
          .options = {.mask_mode = s.causal ? MaskMode::kCausal : MaskMode::kNone}});
  const std::vector<double> t = time_runs(runs, [&] { w.run(q, k, v, out); });
  const double sec = median(t);
  // PERF.md: causal sum 2*(2*kv - qo)*qo*H*(Dqk + Dvo)/2, non-causal sum 2*kv*qo*H*(Dqk + Dvo).
  const double per_req = s.causal ? double(2 * (2 * s.len - s.len) * s.len) * double(s.hq * 2 * s.d) / 2.0
                                  : 2.0 * double(s.len * s.len) * double(s.hq * 2 * s.d);
  const double flops = per_req * double(s.batch);
  return {{"name", fmt::format("prefill {}x{} {}", s.batch, s.len, s.causal ? "causal" : "full")},
          {"op", "ragged_prefill"},
          {"shape", fmt::format("bf16, Hq {} / Hk {}, d {}, {} x {} tokens, {}", s.hq, s.hk, s.d, s.batch,
                                s.len, s.causal ? "causal" : "no mask")},
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
  const Args args = parse_args(argc, argv);
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
  ReadCeiling ceiling(args.quick ? 0.25 : std::max(1.0, args.read_gib));
  std::vector<std::unique_ptr<DecodeCase>> decode;
  for (const DecodeShape& s : args.quick ? std::vector<DecodeShape>{{4, 1024}}
                                         : std::vector<DecodeShape>{{16, 4096}, {1, 32768}, {64, 1024}}) {
    decode.push_back(std::make_unique<DecodeCase>(s));
  }
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
  for (std::size_t c = 0; c < decode.size(); ++c) {
    const DecodeShape& s = decode[c]->shape();
    const double sec = median(decode_s[c]);
    const double best = *std::min_element(decode_s[c].begin(), decode_s[c].end());
    const double gbps = decode[c]->bytes() / sec / 1e9;
    rows.push_back({{"name", fmt::format("decode B{} L{}", s.batch, s.kv_len)},
                    {"op", "paged_decode"},
                    {"shape", fmt::format("bf16 KV, Hq {} / Hk {}, d {}, page {}, batch {} x {}", s.hq, s.hk,
                                          s.d, s.page, s.batch, s.kv_len)},
                    {"ms", sec * 1e3},
                    {"ms_best", best * 1e3},
                    {"bytes", decode[c]->bytes()},
                    {"gbps", gbps},
                    {"gbps_best", decode[c]->bytes() / best / 1e9},
                    {"gflops", decode[c]->flops() / sec / 1e9},
                    {"fraction_of_read", gbps / read_gbps}});
  }
  decode.clear();
  const int runs = args.quick ? 2 : args.runs;
  for (const PrefillShape& s : args.quick ? std::vector<PrefillShape>{{1, 256, true}}
                                          : std::vector<PrefillShape>{{2, 1024, true}, {2, 1024, false}}) {
    rows.push_back(bench_prefill(s, std::max(1, runs / 3)));
  }

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
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_cpu_attention: %s\n", e.what());
  return 2;
}
