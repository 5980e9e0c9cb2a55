// SPDX-License-Identifier: Apache-2.0
// Programmatic dependent launch (RunOptions::enable_pdl): run()'s kernels may start
// while the kernel before them on the stream still runs, so they must read none of
// the caller's tensors before that kernel's writes, and write no output before its
// reads. Here the kernel before lets run() launch at once and only 200 us later
// writes q, the cache and the page ids (poisoned until then: NaN bytes, page ids of
// other pages) and reads the output. Every result must equal the same plan's plain
// launch bit for bit, and the output that kernel read must be the one before run().
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/span_timer.hpp"
#include "cuda/runtime.hpp"
#include "gpu_test_util.hpp"
#include "late_writes.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess)

constexpr int kDelayUs = 200;
constexpr std::uint8_t kOutPattern = 0x3C;  // bf16 1.17: what the output holds before run()

#define SKIP_WITHOUT_PDL()                                                                           \
  do {                                                                                               \
    KVINFER_SKIP_WITHOUT_GPU();                                                                      \
    if (!::kvinfer::cuda::hopper_device(0)) GTEST_SKIP() << "no programmatic launch on this device"; \
  } while (0)

// A tensor run() reads, on the device: `truth` holds its real bytes; before the
// overlapped run it holds `poison` (same bytes count), until the late kernel copies
// the truth in.
struct Input {
  TensorView dev;
  Tensor truth;
  Tensor poison;
};

Input nan_poisoned(const TensorView& dev, const Tensor& truth_host) {
  Input in{dev, truth_host.to(Device::cuda(0)), Tensor::empty(truth_host.view().shape(), truth_host.dtype())};
  fill_bytes(in.poison, 0xFF);
  in.poison = in.poison.to(Device::cuda(0));
  return in;
}

// The reference (plain launch on the true inputs), then the overlapped launch after
// the late kernel; `run` enqueues run() on the stream with the options given.
void check_overlapped_run(std::vector<Input>& inputs, const TensorView& out,
                          const std::function<void(const RunOptions&)>& run) {
  ASSERT_LE(inputs.size(), 3u);
  load_late_write_kernels();  // and the plain run below loads run()'s kernels
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (Input& in : inputs) copy(in.dev, in.truth);
  fill_bytes(out, kOutPattern);
  CUDA_OK(cudaDeviceSynchronize());
  run({.stream = stream, .enable_pdl = false});
  CUDA_OK(cudaStreamSynchronize(stream));
  const std::vector<std::uint8_t> reference = host_bytes(out);
  // The reference is finite (bf16 outputs): equal NaNs from broken inputs would prove nothing.
  ASSERT_EQ(out.dtype(), DType::kBF16);
  std::size_t nans = 0;
  for (std::size_t i = 0; i + 1 < reference.size(); i += 2) {
    const unsigned x = reference[i] | (unsigned(reference[i + 1]) << 8);
    nans += (x & 0x7F80u) == 0x7F80u;  // NaN or infinity
  }
  ASSERT_EQ(nans, 0u) << "non-finite values in the plain run's output";

  for (Input& in : inputs) copy(in.dev, in.poison);
  fill_bytes(out, kOutPattern);
  Tensor seen =
      Tensor::zeros(out.shape(), out.dtype(), Device::cuda(0));  // the output as the late kernel reads it
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<LateCopy> copies;
  for (const Input& in : inputs)
    copies.push_back({in.dev.data(), in.truth.data(), std::size_t(in.truth.nbytes())});
  copies.push_back({seen.data(), out.data(), std::size_t(out.numel()) * out.element_size()});
  launch_late_copies(copies, kDelayUs, stream);
  run({.stream = stream, .enable_pdl = true});
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaStreamDestroy(stream));

  const std::vector<std::uint8_t> overlapped = host_bytes(out);
  ASSERT_EQ(overlapped.size(), reference.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) differ += overlapped[i] != reference[i];
  EXPECT_EQ(differ, 0u) << "bytes of the overlapped run's output that differ from the plain run's";
  const std::vector<std::uint8_t> before = host_bytes(seen);
  std::size_t written_early = 0;
  for (std::uint8_t b : before) written_early += b != kOutPattern;
  EXPECT_EQ(written_early, 0u) << "bytes of the output written before the kernel before run() read them";
}

// Paged decode or prefill: q, a combined cache and its page ids as the inputs.
struct PagedCase {
  std::vector<std::int32_t> qo_lens;  // empty: decode (one row per request)
  std::vector<std::int32_t> kv_lens;
  std::int64_t hq = 32, hk = 8;
  DType kv_dtype = DType::kBF16;
  AttentionOptions options;
};

Tensor random_cache(Shape shape, DType dtype, Rng& rng) {
  if (dtype == DType::kBF16) return random_bf16(shape, rng, 1.0f);
  Tensor t = random_bytes(shape, dtype, rng);  // fp8: every byte but the NaNs (s.1111.111)
  auto* b = static_cast<std::uint8_t*>(t.data());
  for (std::int64_t i = 0; i < t.nbytes(); ++i)
    if ((b[i] & 0x7F) == 0x7F) b[i] ^= 0x01;
  return t;
}

void run_paged_case(const PagedCase& c) {
  constexpr std::int64_t kD = 128, kPage = 16;
  Rng rng(7);
  const Device gpu = Device::cuda(0);
  const HostPageTable t = random_page_table(c.kv_lens, kPage, 3, rng);
  const bool decode = c.qo_lens.empty();
  std::int64_t nnz_q = 0;
  std::vector<std::int32_t> qo_indptr{0};
  for (std::size_t b = 0; b < c.kv_lens.size(); ++b) {
    qo_indptr.push_back(qo_indptr.back() + (decode ? 1 : c.qo_lens[b]));
  }
  nnz_q = qo_indptr.back();
  const Tensor q_host = random_bf16({nnz_q, c.hq, kD}, rng);
  const Tensor cache_host = random_cache({t.num_pages, 2, kPage, c.hk, kD}, c.kv_dtype, rng);
  // Wrong but valid page ids: the true ones rotated by one.
  std::vector<std::int32_t> ids = to_vector_i32(t.indices), wrong(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) wrong[i] = ids[(i + 1) % ids.size()];

  Tensor q = Tensor::empty(q_host.view().shape(), q_host.dtype(), gpu);
  Tensor cache = Tensor::empty(cache_host.view().shape(), cache_host.dtype(), gpu);
  Tensor indices = Tensor::empty(t.indices.view().shape(), DType::kI32, gpu);
  Tensor out = Tensor::empty({nnz_q, c.hq, kD}, DType::kBF16, gpu);
  std::vector<Input> inputs{nan_poisoned(q, q_host), nan_poisoned(cache, cache_host),
                            Input{indices, t.indices.to(gpu), int32_tensor(wrong).to(gpu)}};
  const PagedKVCache kv = PagedKVCache::combined(cache);
  const PageTable table{t.indptr, indices, t.last_page_len};
  // The plan of either wrapper from the case, then the overlapped runs.
  const auto plan_and_check = [&](auto& w, auto args) {
    args.num_qo_heads = c.hq;
    args.num_kv_heads = c.hk;
    args.head_dim = kD;
    args.page_size = kPage;
    args.options = c.options;
    args.kv_dtype = c.kv_dtype;
    w.plan(args);
    check_overlapped_run(inputs, out, [&](const RunOptions& o) { w.run(q, kv, out, o); });
  };
  if (decode) {
    BatchDecodeWithPagedKVCache w(gpu);
    plan_and_check(w, DecodePlanArgs{.page_table = table});
  } else {
    BatchPrefillWithPagedKVCache w(gpu);
    const Tensor qo = int32_tensor(qo_indptr);
    plan_and_check(w, PagedPrefillPlanArgs{.qo_indptr = qo, .page_table = table});
  }
}

// Paged decode on the key-row tile with item warps (16 requests of 1-3k keys).
TEST(CudaPdl, DecodeWaitsForTheKernelBefore) {
  SKIP_WITHOUT_PDL();
  std::vector<std::int32_t> lens;
  for (int b = 0; b < 16; ++b) lens.push_back(1000 + 131 * b);
  run_paged_case({.kv_lens = lens});
}

// One long request: split into chunks, then the merge kernel (itself launched
// programmatically after the attention kernel, which releases it early).
TEST(CudaPdl, SplitDecodeAndItsMergeWaitForTheKernelBefore) {
  SKIP_WITHOUT_PDL();
  run_paged_case({.kv_lens = {20000, 5}});
}

// The soft cap: the CUDA-core decode kernel.
TEST(CudaPdl, CudaCoreDecodeWaitsForTheKernelBefore) {
  SKIP_WITHOUT_PDL();
  run_paged_case({.kv_lens = {700, 1500, 33, 2900}, .options = {.logits_soft_cap = 30.0f}});
}

// fp8 KV: the fp8 decode tile (instances of the default preset).
TEST(CudaPdl, Fp8DecodeWaitsForTheKernelBefore) {
  SKIP_WITHOUT_PDL();
  try {
    run_paged_case({.kv_lens = {4000, 2500, 900, 6000, 17, 3000}, .kv_dtype = DType::kE4M3});
  } catch (const Error& e) {
    if (std::string(e.what()).find("not compiled") != std::string::npos ||
        std::string(e.what()).find("instance preset") != std::string::npos) {
      GTEST_SKIP() << "fp8 KV not compiled in: " << e.what();
    }
    throw;
  }
}

// Causal paged prefill: 128-row tiles (the Hopper mainloop).
TEST(CudaPdl, PagedPrefillWaitsForTheKernelBefore) {
  SKIP_WITHOUT_PDL();
  run_paged_case(
      {.qo_lens = {300, 129, 512}, .kv_lens = {700, 129, 1500}, .options = {.mask_mode = MaskMode::kCausal}});
}

// Ragged prefill: q, k and v as the inputs.
TEST(CudaPdl, RaggedPrefillWaitsForTheKernelBefore) {
  SKIP_WITHOUT_PDL();
  constexpr std::int64_t kHq = 16, kHk = 4, kD = 128;
  Rng rng(8);
  const Device gpu = Device::cuda(0);
  const std::vector<std::int32_t> qo_indptr{0, 200, 260, 700}, kv_indptr{0, 500, 560, 1300};
  const Tensor q_host = random_bf16({qo_indptr.back(), kHq, kD}, rng);
  const Tensor k_host = random_bf16({kv_indptr.back(), kHk, kD}, rng);
  const Tensor v_host = random_bf16({kv_indptr.back(), kHk, kD}, rng);
  Tensor q = Tensor::empty(q_host.view().shape(), DType::kBF16, gpu);
  Tensor k = Tensor::empty(k_host.view().shape(), DType::kBF16, gpu);
  Tensor v = Tensor::empty(v_host.view().shape(), DType::kBF16, gpu);
  Tensor out = Tensor::empty({qo_indptr.back(), kHq, kD}, DType::kBF16, gpu);
  std::vector<Input> inputs{nan_poisoned(q, q_host), nan_poisoned(k, k_host), nan_poisoned(v, v_host)};
  BatchPrefillWithRaggedKVCache w(gpu);
  w.plan({.qo_indptr = int32_tensor(qo_indptr),
          .kv_indptr = int32_tensor(kv_indptr),
          .num_qo_heads = kHq,
          .num_kv_heads = kHk,
          .head_dim_qk = kD,
          .options = {.mask_mode = MaskMode::kCausal}});
  check_overlapped_run(inputs, out, [&](const RunOptions& o) { w.run(q, k, v, out, o); });
}

// The setup above proves something only if run() really starts before the late
// kernel's writes. A programmatic launch that does not wait shows it: it copies q
// while q still holds the poison. Launches may be serialised under tools such as
// compute-sanitizer, so the overlap is required only where
// KVINFER_TEST_REQUIRE_PDL_OVERLAP=1 (scripts/gpu-check.sh's plain test run).
TEST(CudaPdl, TheKernelAfterTheLateOneOverlapsIt) {
  SKIP_WITHOUT_PDL();
  const Device gpu = Device::cuda(0);
  Rng rng(9);
  const Tensor truth = random_bf16({64, 32, 128}, rng).to(gpu);
  Tensor q = Tensor::empty(truth.view().shape(), DType::kBF16, gpu);
  Tensor seen = Tensor::zeros(truth.view().shape(), DType::kBF16, gpu);
  fill_bytes(q, 0xFF);
  load_late_write_kernels();
  CUDA_OK(cudaDeviceSynchronize());
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const LateCopy write_q{q.data(), truth.data(), std::size_t(truth.nbytes())};
  // 20 ms: longer than a time slice of the GPU tests that share the device from other
  // processes, so that the eager copy runs within the delay even if this context waits.
  launch_late_copies(std::span(&write_q, 1), 20000, stream);
  launch_eager_copy({seen.data(), q.data(), std::size_t(q.nbytes())}, stream);
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaStreamDestroy(stream));
  const std::vector<std::uint8_t> got = host_bytes(seen), after = host_bytes(q), want = host_bytes(truth);
  EXPECT_EQ(after, want) << "the late kernel's write";
  std::size_t poison = 0;
  for (std::uint8_t b : got) poison += b == 0xFF;
  const bool overlapped = poison == got.size();
  std::printf("programmatic launch overlapped the late kernel: %s (%zu of %zu bytes read before its write)\n",
              overlapped ? "yes" : "no", poison, got.size());
  const char* require = std::getenv("KVINFER_TEST_REQUIRE_PDL_OVERLAP");
  if (require != nullptr && std::string(require) == "1") EXPECT_TRUE(overlapped);
}

// SpanTimer (kvinfer serve's step times) on a GPU: device time of a span with no host
// round trip inside it, here the late kernel's 50 ms wait after a span without one
// (long enough to stand out under compute-sanitizer, whose racecheck takes ~10 ms to
// run the kernel at all).
TEST(CudaSpanTimer, MeasuresDeviceTimeBetweenRecords) {
  KVINFER_SKIP_WITHOUT_GPU();
  load_late_write_kernels();
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  detail::SpanTimer t(Device::cuda(0), 2, stream);
  t.begin(0);
  launch_late_copies({}, 0, stream);
  t.end();
  t.begin(1);
  launch_late_copies({}, 50000, stream);
  t.end();
  const std::vector<double> s = t.collect();
  CUDA_OK(cudaStreamDestroy(stream));
  EXPECT_GE(s[1], 0.050);  // the wait alone
  EXPECT_LT(s[0], s[1]);
  EXPECT_LT(s[1], 1.0);  // generous: compute-sanitizer slows the launches down
}

}  // namespace
}  // namespace kvinfer::testing
