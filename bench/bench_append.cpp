// SPDX-License-Identifier: Apache-2.0
// append_paged_kv_cache on the GPU, FlashInfer's benchmark patterns: 8 KV heads,
// head_dim 128, page 16, 5000 tokens as 8 requests (even, skewed, one request), plus
// a decode step of 512 requests. Reports bytes read + written / time and the fraction
// of the device-to-device copy bandwidth measured in the same run (PERF.md target:
// >= 80%).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/common/gpu_json.hpp"
#include "bench/common/gpu_report.hpp"
#include "bench/common/page_table.hpp"
#include "bench/common/report.hpp"
#include "core/op_params.hpp"
#include "cuda/page/append.hpp"
#include "kvinfer/kvinfer.hpp"
#include "kvinfer/ops/page.hpp"

using namespace kvinfer;
using namespace kvinfer::bench;

namespace {

constexpr std::int64_t kHeads = 8, kHeadDim = 128, kPageSize = 16;

struct Pattern {
  std::string name;
  std::vector<std::int32_t> append_lens;
};

Tensor to_device(std::span<const std::int32_t> v) {
  return host_i32(v).to(Device::cuda(0));
}

struct Case {
  std::string pattern;
  DType dtype;
  KVLayout layout;
  // A kernel variant run through the backend directly (no validation); none: the
  // public append_paged_kv_cache with its default kernel.
  std::optional<cuda::AppendKernel> kernel;
};

struct Setup {
  std::int64_t nnz = 0, batch = 0, pages = 0;
  Tensor key, value, cache, indptr, indices, last_page_len, batch_indices, positions;
  PagedKVCache kv;
  PageTable table;
};

// Requests with a prefix already in the cache (appends start mid-page) and pages in
// a shuffled order, as a serving system's page pool leaves them.
Setup make_setup(const Pattern& pat, DType dtype, KVLayout layout, std::uint64_t seed) {
  Setup s;
  s.batch = std::int64_t(pat.append_lens.size());
  std::vector<std::int32_t> append_indptr{0}, seq_lens;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int32_t prefix = std::int32_t((37 * b + 11) % 53);
    append_indptr.push_back(append_indptr.back() + pat.append_lens[std::size_t(b)]);
    seq_lens.push_back(prefix + pat.append_lens[std::size_t(b)]);
  }
  const HostPageTable table = make_page_table(seq_lens, kPageSize, seed);
  s.nnz = append_indptr.back();
  s.pages = table.num_pages();

  const Device gpu = Device::cuda(0);
  s.key = Tensor::empty({s.nnz, kHeads, kHeadDim}, dtype, gpu);
  s.value = Tensor::empty({s.nnz, kHeads, kHeadDim}, dtype, gpu);
  if (layout == KVLayout::kNHD) {
    s.cache = Tensor::empty({s.pages, 2, kPageSize, kHeads, kHeadDim}, dtype, gpu);
  } else {
    s.cache = Tensor::empty({s.pages, 2, kHeads, kPageSize, kHeadDim}, dtype, gpu);
  }
  fill_random_bits(s.key.data(), s.key.nbytes(), seed + 1);
  fill_random_bits(s.value.data(), s.value.nbytes(), seed + 2);
  fill_random_bits(s.cache.data(), s.cache.nbytes(), seed + 3);
  s.indptr = to_device(table.indptr);
  s.indices = to_device(table.indices);
  s.last_page_len = to_device(table.last_page_len);
  s.batch_indices = Tensor::empty({s.nnz}, DType::kI32, gpu);
  s.positions = Tensor::empty({s.nnz}, DType::kI32, gpu);
  const Tensor append_indptr_d = to_device(append_indptr), seq_lens_d = to_device(seq_lens);
  get_batch_indices_positions(append_indptr_d, seq_lens_d, s.batch_indices, s.positions);
  KVINFER_CUDA_CHECK(cudaDeviceSynchronize());
  s.kv = PagedKVCache::combined(s.cache, layout);
  s.table = PageTable{s.indptr, s.indices, s.last_page_len};
  return s;
}

void run_append(Setup& s, const std::optional<cuda::AppendKernel>& kernel) {
  if (kernel) {
    cuda::append_paged_kv_cache_with(
        detail::AppendPagedKVParams{s.key, s.value, s.batch_indices, s.positions, s.kv, s.table, nullptr},
        *kernel);
  } else {
    append_paged_kv_cache(s.key, s.value, s.batch_indices, s.positions, s.kv, s.table);
  }
}

// The GPU result equals the CPU backend's on the same inputs (a sanity check at
// benchmark scale; the tests cover the edge cases).
bool check_against_cpu(Setup& s, KVLayout layout, const std::optional<cuda::AppendKernel>& kernel) {
  const Device cpu = Device::cpu();
  Tensor key = s.key.to(cpu), value = s.value.to(cpu), cache = s.cache.to(cpu);
  Tensor indptr = s.indptr.to(cpu), indices = s.indices.to(cpu), last = s.last_page_len.to(cpu);
  Tensor bi = s.batch_indices.to(cpu), pos = s.positions.to(cpu);
  run_append(s, kernel);
  append_paged_kv_cache(key, value, bi, pos, PagedKVCache::combined(cache, layout),
                        PageTable{indptr, indices, last});
  const Tensor gpu_cache = s.cache.to(cpu);
  return std::memcmp(gpu_cache.data(), cache.data(), cache.nbytes()) == 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(
      argc, argv,
      {.description =
           "append_paged_kv_cache on the GPU: bytes read + written / time against the copy bandwidth "
           "of the same run (exit 2: a result differs from the CPU backend's)"});
  Report report = gpu_report("append");
  const Ceiling copy = measure_copy_bandwidth(std::size_t(2) << 30);
  const Ceiling copy_kernel = measure_copy_kernel_bandwidth(std::size_t(2) << 30);
  report.meta()["ceilings"] = {{"copy_bandwidth", to_json(copy)},
                               {"copy_kernel_bandwidth", to_json(copy_kernel)}};
  std::printf("copy bandwidth (cudaMemcpy D2D, read + write): %.0f GB/s; copy kernel %.0f GB/s\n", copy.value,
              copy_kernel.value);

  const std::vector<Pattern> patterns = {
      {"even 8x625", std::vector<std::int32_t>(8, 625)},
      {"skewed 4993+7x1", {4993, 1, 1, 1, 1, 1, 1, 1}},
      {"single 5000+7x0", {5000, 0, 0, 0, 0, 0, 0, 0}},
      {"decode 512x1", std::vector<std::int32_t>(512, 1)},
  };
  std::vector<Case> cases;
  for (const auto& p : patterns) cases.push_back({p.name, DType::kBF16, KVLayout::kNHD, std::nullopt});
  cases.push_back({"even 8x625", DType::kBF16, KVLayout::kHND, std::nullopt});
  cases.push_back({"even 8x625", DType::kE4M3, KVLayout::kNHD, std::nullopt});
  if (args.quick) cases.resize(1);
  // Every kernel variant on the target shape (the default is among them).
  for (const cuda::AppendKernel k : cuda::kAllAppendKernels) {
    cases.push_back({"even 8x625", DType::kBF16, KVLayout::kNHD, k});
    if (!args.quick) cases.push_back({"skewed 4993+7x1", DType::kBF16, KVLayout::kNHD, k});
  }

  GpuTimer timer;
  bool all_ok = true;
  std::uint64_t seed = 1;
  for (const Case& c : cases) {
    const Pattern& pat = *std::find_if(patterns.begin(), patterns.end(),
                                       [&](const Pattern& p) { return p.name == c.pattern; });
    Setup s = make_setup(pat, c.dtype, c.layout, seed++);
    const bool ok = check_against_cpu(s, c.layout, c.kernel);
    all_ok = all_ok && ok;
    const Timing t = timer.time([&] { run_append(s, c.kernel); }, 5, std::max(args.runs, 20), true);
    const double data = double(2 * s.nnz * kHeads * kHeadDim) * double(dtype_size(c.dtype));
    // Read: K and V rows plus the per-token indices and the page table; written: K and V rows.
    const double bytes = 2 * data + double(s.nnz) * 8 + double(s.batch + 1 + s.pages + s.batch) * 4;
    const double gbps = bytes / (t.median_us * 1e3);
    const std::string kernel =
        c.kernel ? std::string(cuda::append_kernel_name(*c.kernel))
                 : "default (" + std::string(cuda::append_kernel_name(cuda::default_append_kernel())) + ")";
    report.add_row({{"name", c.pattern},
                    {"kernel", kernel},
                    {"dtype", std::string(dtype_name(c.dtype))},
                    {"layout", std::string(kv_layout_name(c.layout))},
                    {"nnz", s.nnz},
                    {"batch", s.batch},
                    {"bytes", bytes},
                    {"median_us", t.median_us},
                    {"p10_us", t.p10_us},
                    {"p90_us", t.p90_us},
                    {"GBps", gbps},
                    {"frac_copy", gbps / copy.value},
                    {"matches_cpu", ok}});
  }
  // What plain copies of the same bytes achieve at these sizes, timed the same way: the
  // part of the gap to the 2 GiB copy ceiling that any kernel of this size pays (launch,
  // ramp-up, cold-L2 latency, tail), and how it depends on the kernel's shape.
  for (const std::int64_t nnz : {std::int64_t(5000), std::int64_t(512)}) {
    const std::size_t half = std::size_t(2 * nnz * kHeads * kHeadDim * 2);  // K + V rows, bf16
    for (const Ceiling& c : measure_copies_of(half, timer, std::max(args.runs, 20))) {
      report.add_row({{"name", "same-size copy (reference)"},
                      {"kernel", c.detail},
                      {"dtype", "bfloat16"},
                      {"layout", "-"},
                      {"nnz", nnz},
                      {"bytes", 2.0 * double(half)},
                      {"median_us", c.timing.median_us},
                      {"p10_us", c.timing.p10_us},
                      {"p90_us", c.timing.p90_us},
                      {"GBps", c.value},
                      {"frac_copy", c.value / copy.value},
                      {"matches_cpu", "-"}});
    }
  }
  report.meta()["target"] = "bytes read + written / time >= 80% of copy bandwidth (5000-token patterns)";
  report.finish(args, {"name", "kernel", "dtype", "layout", "nnz", "median_us", "p10_us", "p90_us", "GBps",
                       "frac_copy", "matches_cpu"});
  return all_ok ? 0 : 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_append: %s\n", e.what());
  return 1;
}
