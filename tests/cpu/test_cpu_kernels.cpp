// SPDX-License-Identifier: Apache-2.0
// The CPU backend's vectorised loops against the portable ones: row conversions
// bit for bit (every f16/bf16/fp8 pattern, rounding cases of stores), and the
// attention block steps within float rounding, for every dtype and tile shape.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/kernels.hpp"
#include "kvinfer/core/float_convert.hpp"

namespace kvinfer::cpu {
namespace {

bool have_avx2() {
  return detect_cpu_isa() == CpuIsa::kAvx2;
}

// Equal bit patterns, or both NaN (F16C may quiet a signalling NaN differently).
bool same(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

TEST(CpuKernels, LoadRowMatchesPortableForEveryPattern) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2 on this processor";
  const CpuKernels& fast = kernels_for(CpuIsa::kAvx2);
  const CpuKernels& ref = kernels_for(CpuIsa::kPortable);
  std::vector<std::uint16_t> h(65536 + 5);  // + 5: a tail that is not a whole vector
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = std::uint16_t(i);
  std::vector<std::uint8_t> b(256 + 3);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::uint8_t(i);
  for (DType t : {DType::kF16, DType::kBF16, DType::kE4M3, DType::kE5M2}) {
    const bool wide = t == DType::kF16 || t == DType::kBF16;
    const void* src = wide ? static_cast<const void*>(h.data()) : b.data();
    const std::size_t n = wide ? h.size() : b.size();
    std::vector<float> x(n), y(n);
    fast.load_row(src, t, x.data(), std::int64_t(n));
    ref.load_row(src, t, y.data(), std::int64_t(n));
    for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(same(x[i], y[i])) << dtype_name(t) << " pattern " << i;
  }
}

TEST(CpuKernels, StoreRowMatchesTheScalarConversions) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2 on this processor";
  const CpuKernels& fast = kernels_for(CpuIsa::kAvx2);
  std::mt19937 rng(5);
  std::vector<float> x;
  // Rounding ties, near-overflow, subnormals of both formats, infinities, NaNs.
  for (std::uint32_t base : {0x3F800000u, 0x477FE000u, 0x477FF000u, 0x7F7FFFFFu, 0x00000001u, 0x33800000u,
                             0x38800000u, 0x7F800000u, 0x7FC00001u, 0x7F800001u}) {
    for (std::uint32_t d = 0; d < 64; ++d) {
      x.push_back(std::bit_cast<float>(base + d * 0x1000u));
      x.push_back(-std::bit_cast<float>(base + d * 0x8000u));
    }
  }
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 100000; ++i) x.push_back(std::bit_cast<float>(bits(rng)));
  x.push_back(1.5f);  // an odd length: a scalar tail
  std::vector<std::uint16_t> out(x.size());
  fast.store_row(x.data(), DType::kBF16, out.data(), std::int64_t(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(out[i], f32_to_bf16(x[i])) << std::hex << std::bit_cast<std::uint32_t>(x[i]);
  fast.store_row(x.data(), DType::kF16, out.data(), std::int64_t(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(f16_to_f32(out[i]))) << i;
    } else {
      ASSERT_EQ(out[i], f32_to_f16(x[i])) << std::hex << std::bit_cast<std::uint32_t>(x[i]);
    }
  }
}

// The three block steps on random data, AVX2 against portable, for every dtype of
// the key/value rows and row counts around the register tiles.
TEST(CpuKernels, BlockStepsMatchPortable) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2 on this processor";
  const CpuKernels& fast = kernels_for(CpuIsa::kAvx2);
  const CpuKernels& ref = kernels_for(CpuIsa::kPortable);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const std::int64_t dim = 128, lds = 32;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kE4M3, DType::kE5M2}) {
    for (std::int64_t rows : {1, 2, 3, 4, 5, 8, 9}) {
      for (std::int64_t keys : {1, 2, 7, 32}) {
        const std::size_t es = dtype_size(t);
        std::vector<std::uint8_t> kv(std::size_t(2 * keys * dim) * es);
        std::vector<float> tmp(std::size_t(2 * keys * dim));
        for (float& v : tmp) v = nd(rng);
        ref.store_row(tmp.data(), t, kv.data(), std::int64_t(tmp.size()));
        std::vector<const void*> k_rows, v_rows;
        for (std::int64_t j = 0; j < keys; ++j) {
          k_rows.push_back(kv.data() + std::size_t(j * dim) * es);
          v_rows.push_back(kv.data() + std::size_t((keys + j) * dim) * es);
        }
        std::vector<float> q(std::size_t(rows * dim));
        for (float& v : q) v = nd(rng) * 0.2f;
        std::vector<float> s1(std::size_t(rows * lds), -INFINITY), s2 = s1;
        fast.block_scores(q.data(), dim, rows, k_rows.data(), t, keys, dim, s1.data(), lds, {});
        ref.block_scores(q.data(), dim, rows, k_rows.data(), t, keys, dim, s2.data(), lds, {});
        for (std::int64_t i = 0; i < rows; ++i) {
          for (std::int64_t j = 0; j < keys; ++j) {
            ASSERT_NEAR(s1[i * lds + j], s2[i * lds + j], 1e-4 * (1 + std::abs(s2[i * lds + j])))
                << dtype_name(t) << " " << rows << "x" << keys;
          }
        }
        // Softmax on the same scores (one row fully masked), then the weighted sum.
        s1 = s2;
        for (std::int64_t j = 0; j < keys; ++j) s1[j] = s2[j] = -INFINITY;
        const auto n_rows = static_cast<std::size_t>(rows);
        std::vector<float> m1(n_rows, 0.5f), d1(n_rows, 2.0f), r1(n_rows, 0.0f);
        std::vector<float> m2 = m1, d2 = d1, r2 = r1;
        m1[0] = m2[0] = -INFINITY;
        d1[0] = d2[0] = 0.0f;
        fast.block_softmax(s1.data(), lds, rows, keys, m1.data(), d1.data(), r1.data());
        ref.block_softmax(s2.data(), lds, rows, keys, m2.data(), d2.data(), r2.data());
        EXPECT_EQ(r1[0], 1.0f);  // nothing visible: earlier sums keep their scale
        for (std::int64_t i = 0; i < rows; ++i) {
          ASSERT_EQ(m1[i], m2[i]);
          ASSERT_NEAR(d1[i], d2[i], 1e-5 * d2[i]);
          ASSERT_NEAR(r1[i], r2[i], 1e-6);
          for (std::int64_t j = 0; j < keys_padded(keys); ++j)
            ASSERT_NEAR(s1[i * lds + j], s2[i * lds + j], 1e-6);
        }
        std::vector<float> a1(std::size_t(rows * dim));
        for (float& v : a1) v = nd(rng);
        std::vector<float> a2 = a1;
        fast.block_accumulate(s1.data(), lds, rows, v_rows.data(), t, keys, dim, a1.data(), dim, r1.data(),
                              {});
        ref.block_accumulate(s1.data(), lds, rows, v_rows.data(), t, keys, dim, a2.data(), dim, r1.data(),
                             {});
        for (std::int64_t i = 0; i < rows * dim; ++i) ASSERT_NEAR(a1[i], a2[i], 1e-4 * (1 + std::abs(a2[i])));
      }
    }
  }
}

// The row maximum gets weight exactly 1 (the kernels' exp2 has p(0) == 1), so a
// single visible key reproduces its value exactly.
TEST(CpuKernels, SoftmaxWeightOfTheMaximumIsExactlyOne) {
  for (CpuIsa isa : {CpuIsa::kPortable, detect_cpu_isa()}) {
    const CpuKernels& k = kernels_for(isa);
    std::vector<float> s(8, -INFINITY);
    s[3] = 1234.5f;
    s[5] = 1234.5f - 200.0f;  // far below: underflows to 0
    float m = -INFINITY, d = 0.0f, r = -1.0f;
    k.block_softmax(s.data(), 8, 1, 8, &m, &d, &r);
    EXPECT_EQ(s[3], 1.0f) << cpu_isa_name(isa);
    EXPECT_EQ(s[5], 0.0f) << cpu_isa_name(isa);
    EXPECT_EQ(d, 1.0f) << cpu_isa_name(isa);
    EXPECT_EQ(m, 1234.5f) << cpu_isa_name(isa);
    EXPECT_EQ(r, 0.0f) << cpu_isa_name(isa);
  }
}

}  // namespace
}  // namespace kvinfer::cpu
