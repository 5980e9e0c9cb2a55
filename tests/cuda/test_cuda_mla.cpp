// SPDX-License-Identifier: Apache-2.0
// BatchMLAPagedAttention on the GPU: the CPU backend's pairwise case list, part of
// its wide grid, and GPU-specific cases (every item-row tile, long decodes split and merged) against the
// float64 oracle with poisoned outputs; bitwise repeatability; batch invariance of a
// fixed split; a fixed-capacity plan captured in a CUDA graph and replayed across
// re-plans; and the inputs the GPU rejects.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "cuda/gpu_test_util.hpp"
#include "testing/expect_error.hpp"
#include "testing/mla_batch_invariance.hpp"
#include "testing/mla_case.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kDc = kMlaHeadDimCkv, kDp = kMlaHeadDimKpe;

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess)

// Runs f; a configuration the build's instance preset does not compile is a skip.
#define KVINFER_SKIP_IF_NOT_COMPILED(stmt)                                         \
  try {                                                                            \
    stmt;                                                                          \
  } catch (const Error& e) {                                                       \
    if (std::string(e.what()).find("instance preset") == std::string::npos) throw; \
    GTEST_SKIP() << "not compiled in this build: " << e.what();                    \
  }

// Cases only the GPU needs: each tile of item rows (16, 32, 64), decodes long enough
// to be split over the multiprocessors and merged, and the value scale of fp8.
std::vector<MLACase> gpu_mla_case_list() {
  std::vector<MLACase> cases;
  const auto add = [&](std::string name, std::vector<std::int32_t> qo, std::vector<std::int32_t> kv,
                       std::int64_t heads, auto&& tweak) {
    MLACase c;
    c.name = std::move(name);
    c.qo_lens = std::move(qo);
    c.kv_lens = std::move(kv);
    c.num_heads = heads;
    c.seed = 7000 + cases.size();
    tweak(c);
    cases.push_back(c);
  };
  const auto none = [](MLACase&) {};
  add("decode_h16_rows16", {1, 1, 1}, {700, 33, 1500}, 16, none);
  add("decode_h32_rows32", {1, 1}, {900, 65}, 32, none);
  add("decode_h16_qo2_rows32", {2, 1, 2}, {300, 47, 129}, 16, [](MLACase& c) { c.causal = true; });
  add("decode_h128_rows64", {1, 1}, {1200, 31}, 128, [](MLACase& c) { c.page_size = 64; });
  add("decode_h16_long_split", {1, 1}, {6000, 5}, 16, [](MLACase& c) { c.page_size = 64; });
  // The wgmma kernel's edges (items of 64 rows on Hopper): requests shorter than one
  // key tile and of one tile and one key more, chunks that end inside a page, 1, 2 and
  // 4 query rows per request, fp16, no rotary part on pages of one slot.
  add("decode_h128_f16_short_page16", {1, 1, 1, 1}, {7, 64, 65, 1}, 128, [](MLACase& c) {
    c.q_dtype = c.o_dtype = c.kv_dtype = DType::kF16;
    c.page_size = 16;
  });
  add("spec_h128_qo4_causal_split_in_page", {4, 4, 2}, {1000, 37, 130}, 128, [](MLACase& c) {
    c.causal = true;
    c.page_size = 64;
    c.split.fixed_split_size = 100;
  });
  // Items of 64 rows that the request fills only in part: 40 heads (24 rows of padding)
  // and 48 heads x 3 tokens (two whole items and 16 rows).
  add("decode_h40_partial_item", {1, 1}, {500, 90}, 40, none);
  add("spec_h48_qo3_partial_item", {3, 1}, {260, 1000}, 48, [](MLACase& c) { c.causal = true; });
  add("decode_h64_no_kpe_page1", {1, 1}, {300, 70}, 64, [](MLACase& c) {
    c.head_dim_kpe = 0;
    c.page_size = 1;
  });
  add("decode_h128_long_split_base_e", {1}, {5000}, 128, [](MLACase& c) { c.lse_base_e = true; });
  add("decode_h16_fp8_e4m3", {1, 1, 1, 1}, {2000, 100, 7, 1}, 16, [](MLACase& c) {
    c.kv_dtype = DType::kE4M3;
    c.ckv_scale = 0.75f;
    c.kpe_scale = 1.5f;
  });
  add("decode_h64_fp8_e5m2_f16", {1, 1}, {800, 3000}, 64, [](MLACase& c) {
    c.q_dtype = c.o_dtype = DType::kF16;
    c.kv_dtype = DType::kE5M2;
    c.ckv_scale = 2.0f;
    c.kpe_scale = 0.5f;
  });
  // fp8 tiles read in registers (mla_fp8.cuh): each item size, without the rotary
  // part, fp16 q, pages of one slot, and split chunks that end inside a page.
  add("decode_h32_fp8_e4m3_rows32", {1, 1, 1}, {500, 31, 1100}, 32, [](MLACase& c) {
    c.kv_dtype = DType::kE4M3;
    c.ckv_scale = 1.25f;
    c.kpe_scale = 0.5f;
  });
  add("decode_h16_fp8_e4m3_f16_page1_split", {1, 1, 1}, {900, 17, 250}, 16, [](MLACase& c) {
    c.q_dtype = c.o_dtype = DType::kF16;
    c.kv_dtype = DType::kE4M3;
    c.page_size = 1;
    c.split.fixed_split_size = 48;
  });
  add("prefill_h16_fp8_e5m2_causal_no_kpe", {40, 9}, {300, 9}, 16, [](MLACase& c) {
    c.kv_dtype = DType::kE5M2;
    c.causal = true;
    c.head_dim_kpe = 0;
  });
  add("decode_h128_fp8_e4m3_split_in_page", {1, 2}, {3000, 77}, 128, [](MLACase& c) {
    c.kv_dtype = DType::kE4M3;
    c.page_size = 64;
    c.causal = true;
    c.split.fixed_split_size = 100;
  });
  add("decode_h16_no_kpe_page1", {1, 1}, {400, 77}, 16, [](MLACase& c) {
    c.head_dim_kpe = 0;
    c.page_size = 1;
  });
  add("prefill_h16_causal_rows64", {40, 9}, {300, 9}, 16, [](MLACase& c) { c.causal = true; });
  add("decode_h16_fixed_split_bf16_out_f16", {1, 1, 1}, {1000, 64, 300}, 16, [](MLACase& c) {
    c.split.fixed_split_size = 128;
    c.o_dtype = DType::kF16;
  });
  // fp16 with bf16 (the `full` preset; a skip in others): the mma in bf16, the q tile
  // or each KV tile converted in place.
  add("decode_h16_mixed_f16_q_bf16_kv", {1, 1, 1}, {1500, 40, 1}, 16, [](MLACase& c) {
    c.q_dtype = c.o_dtype = DType::kF16;
    c.kv_dtype = DType::kBF16;
  });
  add("decode_h128_mixed_bf16_q_f16_kv_split", {1, 1}, {4000, 300}, 128, [](MLACase& c) {
    c.kv_dtype = DType::kF16;
    c.o_dtype = DType::kF16;
  });
  add("prefill_h16_mixed_causal_no_kpe", {40, 9}, {300, 9}, 16, [](MLACase& c) {
    c.q_dtype = c.o_dtype = DType::kF16;
    c.kv_dtype = DType::kBF16;
    c.causal = true;
    c.head_dim_kpe = 0;
  });
  return cases;
}

class CudaMLACase : public ::testing::TestWithParam<MLACase> {};

TEST_P(CudaMLACase, MatchesOracle) {
  KVINFER_SKIP_WITHOUT_GPU();
  const MLACase& c = GetParam();
  CaseReport r;
  KVINFER_SKIP_IF_NOT_COMPILED(r = run_mla_case(c, Device::cuda(0)));
  EXPECT_TRUE(r.ok()) << c.describe() << "\n" << r.summary();
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaMLACase, ::testing::ValuesIn(mla_case_list()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(GpuCases, CudaMLACase, ::testing::ValuesIn(gpu_mla_case_list()),
                         [](const auto& info) { return info.param.name; });
// Part of the CPU's wide grid (label `slow` there; the oracle's time is the GPU
// machine's, whose cores run the cases side by side): long KV with 64 and 128 heads,
// long query runs, and random cases.
INSTANTIATE_TEST_SUITE_P(Wide, CudaMLACase, ::testing::ValuesIn(wide_mla_case_list(24, 17)),
                         [](const auto& info) { return info.param.name; });

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The same plan run twice gives the same bits (no atomics, fixed orders).
TEST(CudaMLA, RunsAreRepeatable) {
  KVINFER_SKIP_WITHOUT_GPU();
  MLACase c;
  c.name = "repeat";
  c.qo_lens = {1, 1, 3};
  c.kv_lens = {4000, 20, 777};
  c.num_heads = 16;
  c.causal = true;
  const CaseOutput a = run_mla_case_raw(c, Device::cuda(0));
  const CaseOutput b = run_mla_case_raw(c, Device::cuda(0));
  EXPECT_TRUE(bitwise_equal(a.o, b.o));
  EXPECT_TRUE(bitwise_equal(a.lse, b.lse));
}

// A bf16 GPU tensor of unit normals.
Tensor normal_bf16_gpu(Shape shape, Rng& rng) {
  return random_bf16(shape, rng).to(Device::cuda(0));
}

// With a fixed split size a request's output does not depend on its neighbours, on
// the GPU as on the CPU: the same bits planned alone (12 chunks of 256 keys) as in a
// batch.
TEST(CudaMLA, FixedSplitIsBatchCompositionInvariant) {
  KVINFER_SKIP_WITHOUT_GPU();
  expect_mla_batch_invariance(
      {.qo_lens = {1, 1, 1}, .kv_lens = {50, 3000, 333}, .fixed_split_size = 256, .alone = 1}, Device::cuda(0));
}

// A fixed-capacity plan: run() captured once in a CUDA graph (no host sync or
// allocation inside it), then re-planned with other batches and replayed; each replay
// equals an eager run of a fresh wrapper.
TEST(CudaMLA, CapturedRunReplaysAcrossReplans) {
  KVINFER_SKIP_WITHOUT_GPU();
  constexpr std::int64_t kMaxBatch = 8, kPages = 600, kPage = 16, H = 16;
  Rng rng(5);
  const Device gpu = Device::cuda(0);
  const Tensor cache = normal_bf16_gpu({kPages, kPage, kDc + kDp}, rng);
  const MLACache mla = MLACache::combined(cache);
  Tensor q_nope = normal_bf16_gpu({kMaxBatch, H, kDc}, rng), q_pe = normal_bf16_gpu({kMaxBatch, H, kDp}, rng);
  Tensor out_buf = Tensor::zeros({kMaxBatch, H, kDc}, DType::kBF16, gpu);
  Tensor lse_buf = Tensor::zeros({kMaxBatch, H}, DType::kF32, gpu);
  Tensor indices_buf = Tensor::zeros({kPages}, DType::kI32, gpu);

  BatchMLAPagedAttention graphed(
      gpu, Capacity{.max_batch = kMaxBatch, .max_qo_tokens = kMaxBatch, .max_kv = kPages});
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraphExec_t exec = nullptr;
  for (int trial = 0; trial < 4; ++trial) {
    const int batch = trial == 0 ? int(kMaxBatch) : 1 + int(rng() % kMaxBatch);
    std::vector<std::int32_t> kv_lens;
    for (int b = 0; b < batch; ++b) kv_lens.push_back(trial == 2 && b == 0 ? 8000 : int(1 + rng() % 600));
    const HostPageTable t = random_page_table(kv_lens, kPage, 0, rng);
    ASSERT_LE(t.indices.numel(), kPages);
    copy(indices_buf.view().slice(0, 0, t.indices.numel()), t.indices);
    std::vector<std::int32_t> qo(std::size_t(batch) + 1);
    for (int b = 0; b <= batch; ++b) qo[std::size_t(b)] = b;
    const Tensor qo_indptr = int32_tensor(qo), kv_len = int32_tensor(kv_lens);
    const MLAPlanArgs args =
        mla_plan_args(qo_indptr, t.indptr, indices_buf.view().slice(0, 0, t.indices.numel()), kv_len, H, kPage, 0.07f);
    graphed.plan(args);
    const auto rows = [&](const Tensor& x) { return x.view().slice(0, 0, batch); };
    ASSERT_TRUE(run_in_graph(
        exec, stream,
        [&] { graphed.run(rows(q_nope), rows(q_pe), mla, rows(out_buf), {.lse = rows(lse_buf), .stream = stream}); },
        [&] {
          fill_bytes(out_buf, 0xFF);
          fill_bytes(lse_buf, 0xFF);
        }));

    BatchMLAPagedAttention fresh(gpu);
    fresh.plan(args);
    Tensor out_ref = Tensor::empty({batch, H, kDc}, DType::kBF16, gpu);
    Tensor lse_ref = Tensor::empty({batch, H}, DType::kF32, gpu);
    fresh.run(rows(q_nope), rows(q_pe), mla, out_ref, {.lse = lse_ref});
    const Tensor a = Tensor::empty({batch, H, kDc}, DType::kBF16),
                 b = Tensor::empty({batch, H, kDc}, DType::kBF16);
    copy(a, rows(out_buf));
    copy(b, out_ref);
    const Tensor la = Tensor::empty({batch, H}, DType::kF32), lb = Tensor::empty({batch, H}, DType::kF32);
    copy(la, rows(lse_buf));
    copy(lb, lse_ref);
    int mismatches = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      const float x = bf16_to_f32(a.data_as<std::uint16_t>()[i]),
                  y = bf16_to_f32(b.data_as<std::uint16_t>()[i]);
      if (!(std::abs(x - y) <= 1e-2f)) ++mismatches;
    }
    for (std::int64_t i = 0; i < la.numel(); ++i) {
      if (!(std::abs(la.data_as<float>()[i] - lb.data_as<float>()[i]) <= 1e-3f)) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0) << "trial " << trial << " batch " << batch;
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaStreamDestroy(stream));
}

// What the GPU rejects beyond the CPU's checks, and where tensors must live.
TEST(CudaMLA, RejectsMisplacedAndUnalignedTensors) {
  KVINFER_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  const Tensor qo_indptr = int32_tensor(std::vector<std::int32_t>{0, 3, 5});
  const Tensor kv_indptr = int32_tensor(std::vector<std::int32_t>{0, 2, 3});
  const Tensor kv_len = int32_tensor(std::vector<std::int32_t>{20, 7});
  const Tensor ids_host = int32_tensor(std::vector<std::int32_t>{3, 0, 1});
  const Tensor ids = ids_host.to(gpu);
  const Tensor cache = Tensor::zeros({4, 16, kDc + kDp}, DType::kBF16, gpu);
  const Tensor q_nope = Tensor::zeros({5, 4, kDc}, DType::kBF16, gpu);
  const Tensor q_pe = Tensor::zeros({5, 4, kDp}, DType::kBF16, gpu);
  const Tensor out = Tensor::zeros({5, 4, kDc}, DType::kBF16, gpu);
  MLAPlanArgs args = mla_plan_args(qo_indptr, kv_indptr, ids, kv_len, 4, 16, 0.1f);
  BatchMLAPagedAttention w(gpu);
  ASSERT_NO_THROW(w.plan(args));
  EXPECT_NO_THROW(w.run(q_nope, q_pe, MLACache::combined(cache), out));

  // Rows of 580 elements (1160 bytes) are not 16-byte aligned.
  const Tensor wide = Tensor::zeros({4, 16, 580}, DType::kBF16, gpu);
  const MLACache unaligned =
      MLACache::pair(wide.view().slice(2, 0, kDc), wide.view().slice(2, kDc, kDc + kDp));
  expect_error([&] { w.run(q_nope, q_pe, unaligned, out); }, "ckv_cache", "16-byte aligned");

  // The page table must live where run() reads it, and the run's tensors on the GPU.
  args.kv_indices = ids_host;
  expect_error([&] { w.plan(args); }, "kv_indices.device");
  args.kv_indices = ids;
  w.plan(args);
  const Tensor q_host = Tensor::zeros({5, 4, kDc}, DType::kBF16);
  expect_error([&] { w.run(q_host, q_pe, MLACache::combined(cache), out); }, "q_nope.device");
}

}  // namespace
}  // namespace kvinfer::testing
