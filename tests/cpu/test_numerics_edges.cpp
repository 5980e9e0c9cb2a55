// SPDX-License-Identifier: Apache-2.0
// Numerics at the edges on the CPU backend: logits up to the range of the input
// dtype, a soft cap over huge and infinite logits, rows that see no key, and the
// NaN rule of kvinfer/attention/options.hpp (non-finite values never reach a row
// that cannot see them; NaN propagates where it is seen; zero-weight keys add
// nothing), on the decode-sized tile that reads K/V in place, the prefill tile that
// converts blocks, split-KV and its merge, MLA and the merge operations. The tests
// named CpuAttention.* run again through the portable loops (ctest
// cpu_attention_portable_isa); CpuKernels.* compare the two instruction sets directly.
// The GPU test binary compiles this file again with KVINFER_NUMERICS_ON_CUDA
// (tests/CMakeLists.txt): the same tests, named CudaAttention.*, on cuda:0, where the
// shapes take the 16-row tile, the 128-row Hopper tiles and the general-logits tile.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#if defined(KVINFER_NUMERICS_ON_CUDA)
#include "cuda/gpu_test_util.hpp"
#define NUMERICS_TEST(name) TEST(CudaAttention, name)
#define NUMERICS_START() KVINFER_SKIP_WITHOUT_GPU()
#else
#include "cpu/isa.hpp"
#include "cpu/kernels.hpp"
#define NUMERICS_TEST(name) TEST(CpuAttention, name)
#define NUMERICS_START() \
  do {                   \
  } while (0)
#endif
#include "oracle/oracle.hpp"
#include "testing/host_buffer.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::uint16_t kBf16NaN = 0x7FC0, kBf16Inf = 0x7F80;
constexpr std::int64_t kHq = 4, kHk = 2, kD = 64;

// Where the attention runs; inputs are made on the host and copied there.
#if defined(KVINFER_NUMERICS_ON_CUDA)
const Device kDevice = Device::cuda(0);
#else
const Device kDevice = Device::cpu();
#endif
// The CUDA kernels' clauses of the NaN rule (kvinfer/attention/options.hpp): a
// non-finite V row of a key masked for a row, in a key tile the row's tile reads,
// reaches that row as NaN (the tensor cores' 0 x NaN), and finite logits beyond
// 2^30 once scaled are outside their range.
#if defined(KVINFER_NUMERICS_ON_CUDA)
constexpr bool kCudaRule = true;
#else
constexpr bool kCudaRule = false;
#endif
Tensor on_device(const Tensor& t) { return t.to(kDevice); }
Tensor on_host(const Tensor& t) { return t.to(Device::cpu()); }

// One ragged request (qo_len x kv_len), bf16, Hq 4 / Hk 2 / D 64.
struct Request {
  std::int32_t qo_len, kv_len;
  Tensor q, k, v;
  Request(std::int32_t qo, std::int32_t kv, Rng& rng, float scale = 1.0f)
      : qo_len(qo),
        kv_len(kv),
        q(random_bf16({qo, kHq, kD}, rng, scale)),
        k(random_bf16({kv, kHk, kD}, rng, scale)),
        v(random_bf16({kv, kHk, kD}, rng)) {}
  std::uint16_t* q_at(std::int64_t t, std::int64_t h) const { return q.data_as<std::uint16_t>() + (t * kHq + h) * kD; }
  std::uint16_t* k_at(std::int64_t j, std::int64_t h) const { return k.data_as<std::uint16_t>() + (j * kHk + h) * kD; }
  std::uint16_t* v_at(std::int64_t j, std::int64_t h) const { return v.data_as<std::uint16_t>() + (j * kHk + h) * kD; }
};

struct Result {
  std::vector<float> o;    // [qo_len, Hq, D]
  std::vector<float> lse;  // [qo_len, Hq]
  float o_at(std::int64_t t, std::int64_t h, std::int64_t d) const { return o[std::size_t((t * kHq + h) * kD + d)]; }
  float lse_at(std::int64_t t, std::int64_t h) const { return lse[std::size_t(t * kHq + h)]; }
  bool row_equal(const Result& other, std::int64_t t, std::int64_t h) const {
    return std::memcmp(&o[std::size_t((t * kHq + h) * kD)], &other.o[std::size_t((t * kHq + h) * kD)],
                       kD * sizeof(float)) == 0 &&
           std::bit_cast<std::uint32_t>(lse_at(t, h)) == std::bit_cast<std::uint32_t>(other.lse_at(t, h));
  }
  // Row (t, h) is poisoned: its lse and every element of its o are NaN.
  bool nan_row(std::int64_t t, std::int64_t h) const {
    for (std::int64_t d = 0; d < kD; ++d) {
      if (!std::isnan(o_at(t, h, d))) return false;
    }
    return std::isnan(lse_at(t, h));
  }
  // What a masked non-finite V row may do to row (t, h) on this backend: nothing on
  // the CPU; on CUDA also make every element of its o NaN, with its LSE as it was.
  bool equal_or_v_leak(const Result& clean, std::int64_t t, std::int64_t h) const {
    if (row_equal(clean, t, h)) return true;
    if (!kCudaRule || std::bit_cast<std::uint32_t>(lse_at(t, h)) != std::bit_cast<std::uint32_t>(clean.lse_at(t, h)))
      return false;
    for (std::int64_t d = 0; d < kD; ++d) {
      if (!std::isnan(o_at(t, h, d))) return false;
    }
    return true;
  }
};

Result run(const Request& r, AttentionOptions options, SplitOptions split = {}) {
  Tensor qo = int32_tensor(std::vector<std::int32_t>{0, r.qo_len}), kv = int32_tensor(std::vector<std::int32_t>{0, r.kv_len});
  Tensor out = Tensor::empty({r.qo_len, kHq, kD}, DType::kBF16, kDevice),
         lse = Tensor::empty({r.qo_len, kHq}, DType::kF32, kDevice);
  BatchPrefillWithRaggedKVCache w(kDevice);
  w.plan({.qo_indptr = qo, .kv_indptr = kv, .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim_qk = kD,
          .options = options, .split = split});
  w.run(on_device(r.q), on_device(r.k), on_device(r.v), out, {.lse = lse});
  out = on_host(out);
  lse = on_host(lse);
  Result res{std::vector<float>(std::size_t(out.numel())), std::vector<float>(std::size_t(lse.numel()))};
  for (std::size_t i = 0; i < res.o.size(); ++i) res.o[i] = bf16_to_f32(out.data_as<const std::uint16_t>()[i]);
  std::memcpy(res.lse.data(), lse.data(), res.lse.size() * sizeof(float));
  return res;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> x(std::size_t(t.numel()));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = bf16_to_f32(t.data_as<const std::uint16_t>()[i]);
  return x;
}

oracle::AttentionResult reference(const Request& r, const AttentionOptions& options) {
  const oracle::AttentionSpec spec =
      oracle::spec_from_options(options, r.qo_len, r.kv_len, kHq, kHk, kD, kD);
  return oracle::attention(spec, values(r.q), values(r.k), values(r.v));
}

// The shapes that take each path: 4 tokens x group 2 = 8 packed rows (the tile that
// reads K/V in place), 40 tokens (converted blocks); with and without split-KV.
struct Path {
  const char* name;
  std::int32_t qo_len;
  SplitOptions split;
};
const Path kPaths[] = {
    {"direct", 4, {}},
    {"direct, split", 4, {.fixed_split_size = 16}},
    {"blocks", 40, {}},
    {"blocks, split", 40, {.fixed_split_size = 16}},
};

// Each path on a fresh request of kv_len keys (seeded once): run as drawn, then
// after poison(r) changed an input; check(path, clean, got) compares the two.
template <class Poison, class Check>
void run_poisoned(std::uint64_t seed, std::int32_t kv_len, Poison&& poison, Check&& check) {
  Rng rng(seed);
  for (const Path& path : kPaths) {
    SCOPED_TRACE(path.name);
    Request r(path.qo_len, kv_len, rng);
    const Result clean = run(r, {}, path.split);
    poison(r);
    check(path, clean, run(r, {}, path.split));
  }
}

// ---------------------------------------------------------------- large logits
// q·k up to the range of the input dtype: |q|, |k| ~ 1e4 in bf16 give logits ~1e8,
// a softmax that is one key per row; the result still matches the float64 oracle.
NUMERICS_TEST(NumericsLogitsUpToTheDtypeRange) {
  NUMERICS_START();
  Rng rng(1);
  for (const Path& path : kPaths) {
    SCOPED_TRACE(path.name);
    const Request r(path.qo_len, 70, rng, 1.0e4f);
    for (const AttentionOptions& options : {AttentionOptions{}, AttentionOptions{.mask_mode = MaskMode::kCausal}}) {
      const Result got = run(r, options, path.split);
      const oracle::AttentionResult want = reference(r, options);
      for (std::size_t i = 0; i < got.o.size(); ++i) {
        ASSERT_NEAR(got.o[i], want.o[i], 8e-3 * (1 + std::abs(want.o[i]))) << i;
      }
      for (std::size_t i = 0; i < got.lse.size(); ++i) {
        ASSERT_NEAR(got.lse[i], want.lse[i], 1e-5 * std::abs(want.lse[i])) << i;
      }
    }
  }
}

// A logit beyond float's range (|q|, |k| ~ 1e20, q·k = +inf) makes its row NaN; the
// other rows are untouched.
NUMERICS_TEST(NumericsLogitBeyondFloatMakesItsRowNaN) {
  NUMERICS_START();
  run_poisoned(
      2, 50,
      [](Request& r) {
        for (std::int64_t d = 0; d < kD; ++d) {
          r.q_at(1, 0)[d] = f32_to_bf16(1e20f);  // token 1, head 0 (KV head 0)
          r.k_at(7, 0)[d] = f32_to_bf16(1e20f);
        }
      },
      [](const Path& path, const Result& clean, const Result& got) {
        EXPECT_TRUE(got.nan_row(1, 0));
        for (std::int64_t t = 0; t < path.qo_len; ++t) {
          for (std::int64_t h = 0; h < kHq; ++h) {
            if (t == 1 && h == 0) continue;
            // Other rows see key 7's k too (head 1 shares KV head 0): finite, but the key
            // changed, so only rows of the other KV head are bit for bit the same. Their
            // logits (~1e21) are beyond the CUDA kernels' range.
            if (!kCudaRule || h >= 2) EXPECT_TRUE(std::isfinite(got.lse_at(t, h))) << t << " " << h;
            if (h >= 2) EXPECT_TRUE(got.row_equal(clean, t, h)) << t << " " << h;
          }
        }
      });
}

// A soft cap keeps huge and infinite logits finite: the result is the oracle's.
NUMERICS_TEST(NumericsSoftCapWithHugeLogits) {
  NUMERICS_START();
  Rng rng(3);
  for (const Path& path : kPaths) {
    SCOPED_TRACE(path.name);
    Request r(path.qo_len, 70, rng, 1.0e4f);
    const AttentionOptions options{.mask_mode = MaskMode::kCausal, .logits_soft_cap = 30.0f};
    Result got = run(r, options, path.split);
    oracle::AttentionResult want = reference(r, options);
    for (std::size_t i = 0; i < got.o.size(); ++i) ASSERT_NEAR(got.o[i], want.o[i], 1e-2 * (1 + std::abs(want.o[i]))) << i;
    for (std::size_t i = 0; i < got.lse.size(); ++i) ASSERT_NEAR(got.lse[i], want.lse[i], 1e-3 * (1 + std::abs(want.lse[i])));
    // q·k = +inf: capped to the cap, a finite row.
    for (std::int64_t d = 0; d < kD; ++d) {
      r.q_at(0, 1)[d] = f32_to_bf16(1e20f);
      r.k_at(0, 0)[d] = f32_to_bf16(1e20f);
    }
    got = run(r, options, path.split);
    for (std::int64_t d = 0; d < kD; ++d) ASSERT_TRUE(std::isfinite(got.o_at(0, 1, d)));
    EXPECT_TRUE(std::isfinite(got.lse_at(0, 1)));
  }
}

// ---------------------------------------------------------------- rows that see nothing
NUMERICS_TEST(NumericsAllMaskedRowsGiveZerosAndMinusInf) {
  NUMERICS_START();
  Rng rng(4);
  for (const Path& path : kPaths) {
    SCOPED_TRACE(path.name);
    // Causal with qo_len > kv_len: the first qo_len - kv_len rows see no key.
    const std::int32_t kv = path.qo_len / 2;
    Request r(path.qo_len, std::max(kv, 1), rng);
    // What they cannot see may hold anything: NaN everywhere in k and v (on CUDA,
    // whose tensor cores multiply the masked V rows by 0, finite garbage in v).
    const std::uint16_t v_garbage = kCudaRule ? f32_to_bf16(3.0e38f) : kBf16NaN;
    std::fill_n(r.k.data_as<std::uint16_t>(), r.k.numel(), kBf16NaN);
    std::fill_n(r.v.data_as<std::uint16_t>(), r.v.numel(), v_garbage);
    const Result got = run(r, {.mask_mode = MaskMode::kCausal}, path.split);
    for (std::int64_t t = 0; t < r.qo_len - r.kv_len; ++t) {
      for (std::int64_t h = 0; h < kHq; ++h) {
        EXPECT_EQ(got.lse_at(t, h), -kInf);
        for (std::int64_t d = 0; d < kD; ++d) ASSERT_EQ(std::bit_cast<std::uint32_t>(got.o_at(t, h, d)), 0u);
      }
    }
    // A custom mask that hides every key.
    Tensor qo = int32_tensor(std::vector<std::int32_t>{0, r.qo_len}), kvp = int32_tensor(std::vector<std::int32_t>{0, r.kv_len});
    Tensor mask = Tensor::zeros({std::int64_t(r.qo_len) * r.kv_len}, DType::kBool);
    Tensor out = Tensor::empty({r.qo_len, kHq, kD}, DType::kBF16, kDevice),
           lse = Tensor::empty({r.qo_len, kHq}, DType::kF32, kDevice);
    BatchPrefillWithRaggedKVCache w(kDevice);
    w.plan({.qo_indptr = qo, .kv_indptr = kvp, .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim_qk = kD,
            .options = {.mask_mode = MaskMode::kCustom}, .custom_mask = on_device(mask), .split = path.split});
    std::fill_n(r.k.data_as<std::uint16_t>(), r.k.numel(), kBf16NaN);
    std::fill_n(r.v.data_as<std::uint16_t>(), r.v.numel(), v_garbage);
    w.run(on_device(r.q), on_device(r.k), on_device(r.v), out, {.lse = lse});
    out = on_host(out);
    lse = on_host(lse);
    for (std::int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.data_as<const std::uint16_t>()[i], 0) << i;
    for (std::int64_t i = 0; i < lse.numel(); ++i) ASSERT_EQ(lse.data_as<const float>()[i], -kInf) << i;
  }
}

// ---------------------------------------------------------------- the NaN rule
// Rule 1: a NaN or inf in the K or V row of a key masked for a row never reaches it.
NUMERICS_TEST(NumericsNonFiniteMaskedKeysNeverReachARow) {
  NUMERICS_START();
  Rng rng(5);
  for (const Path& path : kPaths) {
    for (const std::uint16_t poison : {kBf16NaN, kBf16Inf, std::uint16_t(kBf16Inf | 0x8000)}) {
      SCOPED_TRACE(::testing::Message() << path.name << " poison 0x" << std::hex << poison);
      // Causal, qo_len == kv_len: only the last token sees the last key. KV head 0
      // gets the poison in one element of that key's k (and q's element 0 is 1, so
      // that the logit is NaN, +inf or -inf as the poison), KV head 1 in its v.
      Request r(path.qo_len, path.qo_len, rng);
      const std::int64_t last = r.kv_len - 1;
      for (std::int64_t h = 0; h < 2; ++h) r.q_at(last, h)[0] = f32_to_bf16(1.0f);
      const Result clean = run(r, {.mask_mode = MaskMode::kCausal}, path.split);
      for (std::int64_t d = 0; d < kD; ++d) r.v_at(last, 1)[d] = poison;
      r.k_at(last, 0)[0] = poison;
      const Result got = run(r, {.mask_mode = MaskMode::kCausal}, path.split);
      for (std::int64_t t = 0; t < last; ++t) {
        for (std::int64_t h = 0; h < 2; ++h) EXPECT_TRUE(got.row_equal(clean, t, h)) << t << " " << h;
        for (std::int64_t h = 2; h < kHq; ++h) EXPECT_TRUE(got.equal_or_v_leak(clean, t, h)) << t << " " << h;
      }
      for (std::int64_t h = 0; h < 2; ++h) {
        if (poison == std::uint16_t(kBf16Inf | 0x8000)) {
          // A logit of -inf: the key weighs nothing (rule 2); the row stays finite.
          EXPECT_TRUE(std::isfinite(got.lse_at(last, h))) << h;
          for (std::int64_t d = 0; d < kD; ++d) ASSERT_TRUE(std::isfinite(got.o_at(last, h, d)));
        } else {
          EXPECT_TRUE(got.nan_row(last, h)) << h;  // NaN or +inf: the row is NaN
        }
      }
      for (std::int64_t h = 2; h < 4; ++h) {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(got.lse_at(last, h)), std::bit_cast<std::uint32_t>(clean.lse_at(last, h)))
            << "a non-finite v leaves the LSE as it was";
        EXPECT_FALSE(std::isfinite(got.o_at(last, h, 0)));
      }
    }
  }
}

// Rule 1 across requests and heads: NaN in every K/V row of one request changes no
// other request, bit for bit.
NUMERICS_TEST(NumericsNaNStaysInItsRequest) {
  NUMERICS_START();
  Rng rng(6);
  const std::vector<std::int32_t> qo{0, 3, 43, 44}, kv{0, 30, 130, 170};
  Tensor qo_t = int32_tensor(qo), kv_t = int32_tensor(kv);
  Tensor q = random_bf16({44, kHq, kD}, rng), k = random_bf16({170, kHk, kD}, rng), v = random_bf16({170, kHk, kD}, rng);
  for (const SplitOptions split : {SplitOptions{}, SplitOptions{.fixed_split_size = 32}}) {
    const auto go = [&] {
      Tensor out = Tensor::empty({44, kHq, kD}, DType::kBF16, kDevice);
      BatchPrefillWithRaggedKVCache w(kDevice);
      w.plan({.qo_indptr = qo_t, .kv_indptr = kv_t, .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim_qk = kD,
              .options = {.mask_mode = MaskMode::kCausal}, .split = split});
      w.run(on_device(q), on_device(k), on_device(v), out);
      out = on_host(out);
      const auto* p = out.data_as<const std::uint16_t>();
      return std::vector<std::uint16_t>(p, p + out.numel());
    };
    const std::vector<std::uint16_t> clean = go();
    Tensor k_saved = random_bf16({100, kHk, kD}, rng);
    copy(k_saved, k.view().slice(0, 30, 130));
    std::fill_n(k.data_as<std::uint16_t>() + 30 * kHk * kD, 100 * kHk * kD, kBf16NaN);
    std::fill_n(v.data_as<std::uint16_t>() + 30 * kHk * kD, 100 * kHk * kD, kBf16NaN);
    const std::vector<std::uint16_t> poisoned = go();
    const std::size_t row = kHq * kD;
    EXPECT_TRUE(std::equal(clean.begin(), clean.begin() + 3 * row, poisoned.begin()));
    EXPECT_TRUE(std::equal(clean.begin() + 43 * row, clean.end(), poisoned.begin() + 43 * row));
    for (std::size_t i = 3 * row; i < 43 * row; ++i) ASSERT_TRUE(std::isnan(bf16_to_f32(poisoned[i]))) << i;
    copy(k.view().slice(0, 30, 130), k_saved);
    fill_normal(v.view().slice(0, 30, 130), rng);
  }
}

// Rule 3: a NaN in q makes its row NaN and no other.
NUMERICS_TEST(NumericsNaNInQueryMakesItsRowNaN) {
  NUMERICS_START();
  run_poisoned(
      7, 60, [](Request& r) { r.q_at(2, 3)[5] = kBf16NaN; },
      [](const Path& path, const Result& clean, const Result& got) {
        for (std::int64_t t = 0; t < path.qo_len; ++t) {
          for (std::int64_t h = 0; h < kHq; ++h) {
            EXPECT_TRUE(t == 2 && h == 3 ? got.nan_row(t, h) : got.row_equal(clean, t, h)) << t << " " << h;
          }
        }
      });
}

// MLA: a NaN in the latent row of a key masked for a row never reaches it; the row
// that sees it is NaN.
NUMERICS_TEST(NumericsMLAMaskedLatentRows) {
  NUMERICS_START();
  Rng rng(8);
  constexpr std::int64_t kHeads = 16, kDc = kMlaHeadDimCkv, kDp = kMlaHeadDimKpe, kPage = 16;
  const std::int32_t len = 40;
  for (const SplitOptions split : {SplitOptions{}, SplitOptions{.fixed_split_size = 16}}) {
    Tensor cache = random_bf16({3, kPage, kDc + kDp}, rng);
    Tensor qo = int32_tensor(std::vector<std::int32_t>{0, len}), kv_indptr = int32_tensor(std::vector<std::int32_t>{0, 3});
    Tensor kv_indices = int32_tensor(std::vector<std::int32_t>{2, 0, 1}), kv_len = int32_tensor(std::vector<std::int32_t>{len});
    Tensor qn = random_bf16({len, kHeads, kDc}, rng), qp = random_bf16({len, kHeads, kDp}, rng);
    const auto go = [&] {
      Tensor out = Tensor::empty({len, kHeads, kDc}, DType::kBF16, kDevice);
      const Tensor indices = on_device(kv_indices), cache_dev = on_device(cache);
      BatchMLAPagedAttention w(kDevice);
      w.plan({.qo_indptr = qo, .kv_indptr = kv_indptr, .kv_indices = indices, .kv_len = kv_len,
              .num_heads = kHeads, .page_size = kPage, .causal = true, .sm_scale = 0.07f, .split = split});
      w.run(on_device(qn), on_device(qp), MLACache::combined(cache_dev), out);
      out = on_host(out);
      const auto* p = out.data_as<const std::uint16_t>();
      return std::vector<std::uint16_t>(p, p + out.numel());
    };
    const std::vector<std::uint16_t> clean = go();
    // Key 39 (page 1, slot 7): only the last token sees it.
    std::fill_n(cache.data_as<std::uint16_t>() + (1 * kPage + 7) * (kDc + kDp), kDc + kDp, kBf16NaN);
    const std::vector<std::uint16_t> got = go();
    const std::size_t row = kHeads * kDc;
    if constexpr (kCudaRule) {
      // The latent row is K and V at once: a (token, head) row before the last is as it
      // was, or wholly NaN (0 x NaN).
      for (std::size_t r0 = 0; r0 < (len - 1) * row; r0 += kDc) {
        const bool same = std::equal(clean.begin() + r0, clean.begin() + r0 + kDc, got.begin() + r0);
        const bool nan = std::all_of(got.begin() + r0, got.begin() + r0 + kDc,
                                     [](std::uint16_t x) { return std::isnan(bf16_to_f32(x)); });
        ASSERT_TRUE(same || nan) << r0 / kDc;
      }
    } else {
      EXPECT_TRUE(std::equal(clean.begin(), clean.begin() + (len - 1) * row, got.begin()));
    }
    for (std::size_t i = (len - 1) * row; i < got.size(); ++i) ASSERT_TRUE(std::isnan(bf16_to_f32(got[i])));
  }
}

// Rule 4: merges weigh empty states at nothing and propagate a NaN LSE otherwise.
NUMERICS_TEST(NumericsMergesOfNonFiniteStates) {
  NUMERICS_START();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto state = [](float o, float lse) {
    Tensor v = Tensor::empty({1, 1, 16}, DType::kF32), s = Tensor::empty({1, 1}, DType::kF32);
    std::fill_n(v.data_as<float>(), 16, o);
    s.data_as<float>()[0] = lse;
    return std::pair{std::move(v), std::move(s)};
  };
  const auto merged = [&](float oa, float la, float ob, float lb) {
    auto [va, sa] = state(oa, la);
    auto [vb, sb] = state(ob, lb);
    auto [vo, so] = state(0, 0);
    Tensor vo_d = on_device(vo), so_d = on_device(so);
    merge_state(on_device(va), on_device(sa), on_device(vb), on_device(sb), vo_d, so_d);
    vo = on_host(vo_d);
    so = on_host(so_d);
    return std::pair{vo.data_as<float>()[0], so.data_as<float>()[0]};
  };
  auto [o1, l1] = merged(2.0f, nan, 5.0f, 1.0f);
  EXPECT_TRUE(std::isnan(o1) && std::isnan(l1));
  auto [o2, l2] = merged(2.0f, 1.0f, 5.0f, nan);
  EXPECT_TRUE(std::isnan(o2) && std::isnan(l2));
  auto [o3, l3] = merged(2.0f, nan, 5.0f, -kInf);  // merged only with an empty state: unchanged
  EXPECT_EQ(o3, 2.0f);
  EXPECT_TRUE(std::isnan(l3));
  // merge_states, whatever the NaN state's position.
  for (int pos = 0; pos < 3; ++pos) {
    Tensor v = Tensor::empty({1, 3, 1, 16}, DType::kF32), s = Tensor::empty({1, 3, 1}, DType::kF32);
    for (int k = 0; k < 3; ++k) {
      std::fill_n(v.data_as<float>() + k * 16, 16, float(k + 1));
      s.data_as<float>()[k] = k == pos ? nan : float(k);
    }
    Tensor vo = Tensor::empty({1, 1, 16}, DType::kF32, kDevice), so = Tensor::empty({1, 1}, DType::kF32, kDevice);
    merge_states(on_device(v), on_device(s), vo, so);
    vo = on_host(vo);
    so = on_host(so);
    EXPECT_TRUE(std::isnan(vo.data_as<float>()[0])) << pos;
    EXPECT_TRUE(std::isnan(so.data_as<float>()[0])) << pos;
    // One NaN state and two empty ones: the NaN state unchanged.
    for (int k = 0; k < 3; ++k) s.data_as<float>()[k] = k == pos ? nan : -kInf;
    vo = Tensor::empty({1, 1, 16}, DType::kF32, kDevice);
    so = Tensor::empty({1, 1}, DType::kF32, kDevice);
    merge_states(on_device(v), on_device(s), vo, so);
    vo = on_host(vo);
    so = on_host(so);
    EXPECT_EQ(vo.data_as<float>()[0], float(pos + 1)) << pos;
    EXPECT_TRUE(std::isnan(so.data_as<float>()[0])) << pos;
  }
}

}  // namespace
}  // namespace kvinfer::testing

#if !defined(KVINFER_NUMERICS_ON_CUDA)
namespace kvinfer::cpu {
namespace {

// The block steps of both instruction sets follow the rule the same way.
std::vector<CpuIsa> isas() {
  std::vector<CpuIsa> v{CpuIsa::kPortable};
  if (detect_cpu_isa() == CpuIsa::kAvx2) v.push_back(CpuIsa::kAvx2);
  return v;
}

TEST(CpuKernels, SoftmaxPoisonsARowOnANaNOrInfiniteScore) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const CpuIsa isa : isas()) {
    const CpuKernels& k = kernels_for(isa);
    // Row 0: a NaN among finite scores; row 1: +inf; row 2: only NaN; row 3: clean.
    std::vector<float> s(4 * 16, 1.0f);
    s[3] = nan;
    s[16 + 9] = inf;
    for (int j = 0; j < 16; ++j) s[32 + j] = nan;
    std::vector<float> m(4, -inf), d(4, 0.0f), r(4, 0.0f);
    k.block_softmax(s.data(), 16, 4, 16, m.data(), d.data(), r.data());
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(std::isnan(d[i])) << cpu_isa_name(isa) << " row " << i;
      EXPECT_TRUE(std::isnan(r[i])) << cpu_isa_name(isa) << " row " << i;
      for (int j = 0; j < 16; ++j) EXPECT_EQ(s[i * 16 + j], 0.0f) << cpu_isa_name(isa);
    }
    EXPECT_FLOAT_EQ(d[3], 16.0f);
    // A poisoned row stays so: weights 0, rescale 1.
    std::vector<float> s2(4 * 16, 2.0f);
    k.block_softmax(s2.data(), 16, 4, 16, m.data(), d.data(), r.data());
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(std::isnan(d[i]));
      EXPECT_EQ(r[i], 1.0f);
      for (int j = 0; j < 16; ++j) EXPECT_EQ(s2[i * 16 + j], 0.0f);
    }
  }
}

TEST(CpuKernels, ZeroWeightKeysAddNothing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const CpuIsa isa : isas()) {
    const CpuKernels& k = kernels_for(isa);
    for (const std::int64_t rows : {1, 3, 4, 7}) {
      constexpr std::int64_t kKeys = 40, kDim = 32;  // more keys than one run of 32
      std::vector<float> values(kKeys * kDim, 1.0f);
      std::vector<const void*> v_rows(kKeys);
      for (std::int64_t j = 0; j < kKeys; ++j) v_rows[std::size_t(j)] = values.data() + j * kDim;
      std::vector<float> w(std::size_t(rows) * kKeys, 0.5f);
      // Key 5 and key 37: NaN values, weight 0 in every row; key 9: weight 0 in row 0 only.
      for (std::int64_t d = 0; d < kDim; ++d) values[5 * kDim + d] = values[37 * kDim + d] = values[9 * kDim + d] = nan;
      for (std::int64_t i = 0; i < rows; ++i) w[std::size_t(i * kKeys + 5)] = w[std::size_t(i * kKeys + 37)] = 0.0f;
      w[9] = 0.0f;
      std::vector<float> acc(std::size_t(rows * kDim), 0.0f), rescale(std::size_t(rows), 1.0f);
      k.block_accumulate(w.data(), kKeys, rows, v_rows.data(), DType::kF32, kKeys, kDim, acc.data(), kDim,
                         rescale.data(), {});
      for (std::int64_t d = 0; d < kDim; ++d) {
        EXPECT_FLOAT_EQ(acc[std::size_t(d)], 0.5f * 37) << cpu_isa_name(isa) << " rows " << rows;
        for (std::int64_t i = 1; i < rows; ++i) EXPECT_TRUE(std::isnan(acc[std::size_t(i * kDim + d)]));
      }
    }
  }
}

}  // namespace
}  // namespace kvinfer::cpu
#endif  // !KVINFER_NUMERICS_ON_CUDA
