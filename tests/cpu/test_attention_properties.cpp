// SPDX-License-Identifier: Apache-2.0
// Properties of the CPU attention beyond the oracle comparison: batch and thread
// invariance with a fixed split size, custom mask == causal, single_prefill's 2-D
// mask == its flat and packed forms, one visible key with
// an extreme logit, fixed-capacity re-planning, re-plans with custom masks and ALiBi,
// options.backend and RunOptions::enable_pdl ignored on the CPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "cpu/thread_pool.hpp"
#include "kvinfer/kvinfer.hpp"
#include "testing/attention_case.hpp"
#include "testing/random.hpp"
#include "testing/thread_cpu_time.hpp"

namespace kvinfer::testing {
namespace {

std::vector<std::uint16_t> bits(const Tensor& t) {
  std::vector<std::uint16_t> v(std::size_t(t.numel()));
  std::memcpy(v.data(), t.data(), t.nbytes());
  return v;
}

// Ragged prefill of three requests; request 1 alone must give bitwise the same
// rows, whatever the thread count, when the split size is fixed.
TEST(CpuAttention, FixedSplitIsBatchAndThreadInvariant) {
  Rng rng(11);
  const std::vector<std::int32_t> qo_indptr{0, 3, 11, 12}, kv_indptr{0, 700, 1900, 2000};
  const std::int64_t hq = 8, hk = 2, d = 64;
  Tensor q = random_bf16({12, hq, d}, rng), k = random_bf16({2000, hk, d}, rng), v = random_bf16({2000, hk, d}, rng);
  auto run = [&](std::span<const std::int32_t> qi, std::span<const std::int32_t> ki, const TensorView& qv,
                 const TensorView& kvw, const TensorView& vv) {
    Tensor out = Tensor::empty({qv.size(0), hq, d}, DType::kBF16);
    BatchPrefillWithRaggedKVCache w;
    w.plan({.qo_indptr = TensorView(const_cast<std::int32_t*>(qi.data()), DType::kI32, {std::int64_t(qi.size())}),
            .kv_indptr = TensorView(const_cast<std::int32_t*>(ki.data()), DType::kI32, {std::int64_t(ki.size())}),
            .num_qo_heads = hq, .num_kv_heads = hk, .head_dim_qk = d,
            .options = {.mask_mode = MaskMode::kCausal},
            .split = {.fixed_split_size = 256}});
    w.run(qv, kvw, vv, out);
    return out;
  };
  std::vector<std::vector<std::uint16_t>> results;
  for (int threads : {1, 2, 3}) {
    cpu::set_num_threads(threads);
    results.push_back(bits(run(qo_indptr, kv_indptr, q, k, v)));
  }
  cpu::set_num_threads(0);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  const std::vector<std::int32_t> qi{0, 8}, ki{0, 1200};
  const Tensor alone = run(qi, ki, q.view().slice(0, 3, 11), k.view().slice(0, 700, 1900), v.view().slice(0, 700, 1900));
  const std::vector<std::uint16_t> all = results[0];
  const std::vector<std::uint16_t> mine(all.begin() + 3 * hq * d, all.begin() + 11 * hq * d);
  EXPECT_EQ(bits(alone), mine);
}

TEST(CpuAttention, CustomMaskOfTheCausalTriangleEqualsCausal) {
  Rng rng(12);
  const std::vector<std::int32_t> qo_indptr{0, 17, 30}, kv_indptr{0, 54, 151};
  const std::int64_t hq = 4, hk = 4, d = 128;
  Tensor q = random_bf16({30, hq, d}, rng), k = random_bf16({151, hk, d}, rng), v = random_bf16({151, hk, d}, rng);
  std::vector<std::uint8_t> mask;
  for (int r = 0; r < 2; ++r) {
    const int qo = qo_indptr[r + 1] - qo_indptr[r], kv = kv_indptr[r + 1] - kv_indptr[r];
    for (int i = 0; i < qo; ++i)
      for (int j = 0; j < kv; ++j) mask.push_back(j <= i + kv - qo ? 1 : 0);
  }
  const Tensor qi = int32_tensor(qo_indptr), ki = int32_tensor(kv_indptr);
  Tensor out_causal = Tensor::empty({30, hq, d}, DType::kBF16), out_custom = Tensor::empty({30, hq, d}, DType::kBF16);
  Tensor lse_causal = Tensor::empty({30, hq}, DType::kF32), lse_custom = Tensor::empty({30, hq}, DType::kF32);
  BatchPrefillWithRaggedKVCache w;
  w.plan({.qo_indptr = qi, .kv_indptr = ki, .num_qo_heads = hq, .num_kv_heads = hk, .head_dim_qk = d,
          .options = {.mask_mode = MaskMode::kCausal}});
  w.run(q, k, v, out_causal, {.lse = lse_causal});
  w.plan({.qo_indptr = qi, .kv_indptr = ki, .num_qo_heads = hq, .num_kv_heads = hk, .head_dim_qk = d,
          .options = {.mask_mode = MaskMode::kCustom},
          .custom_mask = TensorView(mask.data(), DType::kBool, {std::int64_t(mask.size())})});
  w.run(q, k, v, out_custom, {.lse = lse_custom});
  EXPECT_EQ(bits(out_causal), bits(out_custom));
  EXPECT_EQ(0, std::memcmp(lse_causal.data(), lse_custom.data(), lse_causal.nbytes()));
}

// single_prefill's 2-D bool mask [qo_len, kv_len] is the flat mask's bytes: the
// same output and LSE, bit for bit, and the packed form of the same mask too.
TEST(CpuAttention, SinglePrefillTwoDimensionalMaskEqualsTheFlatOne) {
  Rng rng(21);
  const std::int64_t qo = 13, kv = 70, hq = 4, hk = 2, d = 64;
  Tensor q = random_bf16({qo, hq, d}, rng), k = random_bf16({kv, hk, d}, rng), v = random_bf16({kv, hk, d}, rng);
  const Tensor flat = random_bools(qo * kv, rng);
  const TensorView two_d(flat.data(), DType::kBool, {qo, kv});
  const Tensor packed = packbits(flat, BitOrder::kLittle);
  const SinglePrefillArgs custom{.options = {.mask_mode = MaskMode::kCustom}};
  std::vector<std::vector<std::uint16_t>> outs;
  std::vector<std::vector<float>> lses;
  for (const TensorView& mask : {flat.view(), two_d, packed.view()}) {
    Tensor out = Tensor::empty({qo, hq, d}, DType::kBF16), lse = Tensor::empty({qo, hq}, DType::kF32);
    SinglePrefillArgs a = custom;
    a.custom_mask = mask;
    single_prefill(q, k, v, out, a, {.lse = lse});
    outs.push_back(bits(out));
    lses.emplace_back(lse.data_as<float>(), lse.data_as<float>() + lse.numel());
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
  EXPECT_EQ(0, std::memcmp(lses[0].data(), lses[1].data(), lses[0].size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(lses[0].data(), lses[2].data(), lses[0].size() * sizeof(float)));
}

// A window of 0 leaves each row exactly one key; with huge logits the output must
// be that key's value and the LSE its base-2 score.
TEST(CpuAttention, OneVisibleKeyWithAnExtremeLogit) {
  const std::int64_t n = 6, d = 64;
  Tensor q = Tensor::empty({n, 1, d}, DType::kF16), k = Tensor::empty({n, 1, d}, DType::kF16);
  Tensor v = Tensor::empty({n, 1, d}, DType::kF16), out = Tensor::empty({n, 1, d}, DType::kF16);
  Tensor lse = Tensor::empty({n, 1}, DType::kF32);
  for (std::int64_t i = 0; i < n * d; ++i) {
    q.data_as<std::uint16_t>()[i] = f32_to_f16(50.0f);
    k.data_as<std::uint16_t>()[i] = f32_to_f16(i / d % 2 ? 50.0f : -50.0f);
    v.data_as<std::uint16_t>()[i] = f32_to_f16(float(i % 97) - 40.0f);
  }
  single_prefill(q, k, v, out, {.options = {.mask_mode = MaskMode::kCausal, .window_left = 0}}, {.lse = lse});
  for (std::int64_t i = 0; i < n; ++i) {
    const double score = (i % 2 ? 1.0 : -1.0) * 2500.0 * d / std::sqrt(double(d));
    EXPECT_NEAR(lse.data_as<float>()[i], score / std::log(2.0), 1e-6 * std::abs(score / std::log(2.0)));
    for (std::int64_t e = 0; e < d; ++e) {
      EXPECT_EQ(out.data_as<std::uint16_t>()[i * d + e], v.data_as<std::uint16_t>()[i * d + e]) << i << "," << e;
    }
  }
}

// A fixed-capacity wrapper re-planned with other batches keeps its workspace size
// and gives bitwise the results of a fresh wrapper with the same split size.
TEST(CpuAttention, FixedCapacityReplan) {
  const std::int64_t hq = 8, hk = 2, d = 64, page = 16, pages = 256;
  BatchDecodeWithPagedKVCache fixed(Device::cpu(), KVLayout::kNHD,
                                    Capacity{.max_batch = 16, .max_qo_tokens = 16, .max_kv = pages});
  Rng rng(13);
  Tensor cache = random_bf16({pages, 2, page, hk, d}, rng);
  const PagedKVCache kv = PagedKVCache::combined(cache);
  std::optional<WorkspaceSize> size;
  for (int trial = 0; trial < 6; ++trial) {
    const int batch = 1 + int(rng() % 16);
    std::vector<std::int32_t> kv_lens;
    for (int b = 0; b < batch; ++b) kv_lens.push_back(int(rng() % 250));
    const HostPageTable t = random_page_table(kv_lens, page, pages - 16 * 16, rng);
    const DecodePlanArgs args{.page_table = t.view(), .num_qo_heads = hq, .num_kv_heads = hk, .head_dim = d,
                              .page_size = page, .split = {.fixed_split_size = 64}};
    const WorkspaceSize ws = fixed.workspace_size(args);
    if (size) {
      EXPECT_EQ(ws.int_bytes, size->int_bytes);
      EXPECT_EQ(ws.float_bytes, size->float_bytes);
    }
    size = ws;
    Tensor q = random_bf16({batch, hq, d}, rng);
    Tensor out_fixed = Tensor::empty({batch, hq, d}, DType::kBF16), out_fresh = Tensor::empty({batch, hq, d}, DType::kBF16);
    fixed.plan(args);
    fixed.run(q, kv, out_fixed);
    BatchDecodeWithPagedKVCache fresh;
    fresh.plan(args);
    fresh.run(q, kv, out_fresh);
    EXPECT_EQ(bits(out_fixed), bits(out_fresh)) << "trial " << trial;
  }
  // Beyond the capacity: a clear error.
  std::vector<std::int32_t> too_many(17, 5);
  const HostPageTable t = random_page_table(too_many, page, 0, rng);
  EXPECT_THROW(fixed.plan({.page_table = t.view(), .num_qo_heads = hq, .num_kv_heads = hk, .head_dim = d,
                           .page_size = page}),
               Error);
}

// One wrapper re-planned with boolean custom masks of other sizes (the packed mask's
// buffer is reused while it fits, grown when not) and ALiBi gives bitwise the
// results of a fresh wrapper for each batch.
TEST(CpuAttention, ReplansWithCustomMasksAndAlibiMatchFreshPlans) {
  Rng rng(17);
  const std::int64_t hq = 4, hk = 2, d = 64;
  BatchPrefillWithRaggedKVCache reused;
  for (int trial = 0; trial < 5; ++trial) {
    const int batch = 1 + trial % 3;
    std::vector<std::int32_t> qo_indptr{0}, kv_indptr{0};
    std::vector<std::uint8_t> mask;
    for (int b = 0; b < batch; ++b) {
      const int qo = 1 + int(rng() % (trial == 3 ? 90 : 20)), kv = qo + int(rng() % 40);  // trial 3 grows the mask
      qo_indptr.push_back(qo_indptr.back() + qo);
      kv_indptr.push_back(kv_indptr.back() + kv);
      for (int i = 0; i < qo * kv; ++i) mask.push_back(rng() % 3 != 0);
    }
    const std::int64_t nnz_q = qo_indptr.back(), nnz_kv = kv_indptr.back();
    Tensor q = random_bf16({nnz_q, hq, d}, rng), k = random_bf16({nnz_kv, hk, d}, rng), v = random_bf16({nnz_kv, hk, d}, rng);
    const Tensor qi = int32_tensor(qo_indptr), ki = int32_tensor(kv_indptr);
    const RaggedPrefillPlanArgs args{
        .qo_indptr = qi, .kv_indptr = ki, .num_qo_heads = hq, .num_kv_heads = hk, .head_dim_qk = d,
        .options = {.mask_mode = MaskMode::kCustom, .pos_encoding = PosEncoding::kAlibi},
        .custom_mask = TensorView(mask.data(), DType::kBool, {std::int64_t(mask.size())})};
    Tensor out_reused = Tensor::empty({nnz_q, hq, d}, DType::kBF16), out_fresh = Tensor::empty({nnz_q, hq, d}, DType::kBF16);
    reused.plan(args);
    reused.run(q, k, v, out_reused);
    BatchPrefillWithRaggedKVCache fresh;
    fresh.plan(args);
    fresh.run(q, k, v, out_fresh);
    EXPECT_EQ(bits(out_reused), bits(out_fresh)) << "trial " << trial;
  }
}

// options.backend chooses a CUDA prefill mainloop; the CPU backend ignores it and
// gives bitwise the same result for each value. Its names are FlashInfer's.
TEST(CpuAttention, PrefillBackendIsIgnoredOnTheCpu) {
  Rng rng(18);
  const std::vector<std::int32_t> qo_indptr{0, 70, 75}, kv_indptr{0, 90, 300};
  const std::int64_t hq = 8, hk = 2, d = 64;
  Tensor q = random_bf16({75, hq, d}, rng), k = random_bf16({300, hk, d}, rng), v = random_bf16({300, hk, d}, rng);
  const Tensor qi = int32_tensor(qo_indptr), ki = int32_tensor(kv_indptr);
  std::vector<std::vector<std::uint16_t>> results;
  for (PrefillBackend backend : {PrefillBackend::kAuto, PrefillBackend::kPortable, PrefillBackend::kHopper}) {
    BatchPrefillWithRaggedKVCache w;
    w.plan({.qo_indptr = qi, .kv_indptr = ki, .num_qo_heads = hq, .num_kv_heads = hk, .head_dim_qk = d,
            .options = {.mask_mode = MaskMode::kCausal, .backend = backend}});
    Tensor out = Tensor::empty({75, hq, d}, DType::kBF16);
    w.run(q, k, v, out);
    results.push_back(bits(out));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  EXPECT_EQ(prefill_backend_name(PrefillBackend::kAuto), "auto");
  EXPECT_EQ(prefill_backend_name(PrefillBackend::kPortable), "fa2");
  EXPECT_EQ(prefill_backend_name(PrefillBackend::kHopper), "fa3");
}

// RunOptions::enable_pdl is the GPU's: the CPU runs a plan alike with it on, off or
// unset (a program written for the GPU runs unchanged).
TEST(CpuAttention, EnablePdlIsIgnoredOnTheCpu) {
  Rng rng(19);
  const std::vector<std::int32_t> lens{40, 17};
  const HostPageTable t = random_page_table(lens, 16, 0, rng);
  const Tensor cache = random_bf16({t.num_pages, 2, 16, 2, 64}, rng);
  const Tensor q = random_bf16({2, 4, 64}, rng);
  BatchDecodeWithPagedKVCache w;
  w.plan({.page_table = t.view(), .num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 64, .page_size = 16});
  std::vector<std::vector<std::uint16_t>> results;
  for (std::optional<bool> pdl :
       {std::optional<bool>{}, std::optional<bool>{true}, std::optional<bool>{false}}) {
    Tensor out = Tensor::empty({2, 4, 64}, DType::kBF16);
    w.run(q, PagedKVCache::combined(cache), out, {.enable_pdl = pdl});
    results.push_back(bits(out));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace kvinfer::testing

namespace kvinfer::testing {
namespace {

// SPEC §5: plan() of a batch of 256 costs under 50 µs on one CPU core (validation,
// schedule and workspace upload included), in thread CPU time.
TEST(CpuAttention, DecodePlanOfBatch256TakesUnder50Microseconds) {
  Rng rng(31);
  std::vector<std::int32_t> kv_lens(256);
  for (auto& k : kv_lens) k = 1 + std::int32_t(rng() % 4096);
  const HostPageTable t = random_page_table(kv_lens, 16, 0, rng);
  BatchDecodeWithPagedKVCache w;
  const DecodePlanArgs args{.page_table = t.view(), .num_qo_heads = 32, .num_kv_heads = 8, .head_dim = 128,
                            .page_size = 16};
  std::vector<double> us = thread_cpu_times(101, [&] { w.plan(args); });
  // The 10th percentile: thread CPU time still grows when a parallel test shares
  // the core's caches, which is not the cost of planning.
  std::nth_element(us.begin(), us.begin() + 10, us.end());
  EXPECT_LT(us[10], 50.0) << "plan() time in microseconds of thread CPU time (10th percentile of 101)";
}

}  // namespace
}  // namespace kvinfer::testing
