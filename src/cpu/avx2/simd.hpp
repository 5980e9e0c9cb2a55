// SPDX-License-Identifier: Apache-2.0
// AVX2 helpers shared by the files of src/cpu/avx2/ (and only by them: everything
// here is compiled with -mavx2 -mfma -mf16c, so it lives in an anonymous namespace
// and never becomes a symbol that a portable caller could link to).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "cpu/kernels.hpp"
#include "kvinfer/core/dtype.hpp"

namespace kvinfer::cpu::avx2 {
namespace {

// A row dtype as a template argument: f(std::integral_constant<DType, T>{}) for the
// storage dtype T of a key, value or converted row (f16, bf16, e4m3, e5m2; f32 for
// any other), so that each loop is compiled once per dtype with its widening inline.
template <class F>
inline void with_row_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF16:
      return f(std::integral_constant<DType, DType::kF16>{});
    case DType::kBF16:
      return f(std::integral_constant<DType, DType::kBF16>{});
    case DType::kE4M3:
      return f(std::integral_constant<DType, DType::kE4M3>{});
    case DType::kE5M2:
      return f(std::integral_constant<DType, DType::kE5M2>{});
    default:
      return f(std::integral_constant<DType, DType::kF32>{});
  }
}

// Prefetches rows [first, last) of a list (into all cache levels).
inline void prefetch_rows(const PrefetchRows& p, std::int64_t first, std::int64_t last) {
  for (std::int64_t i = first; i < last; ++i) {
    const char* row = static_cast<const char*>(p.rows[i]);
    for (std::int64_t b = 0; b < p.row_bytes; b += 64) _mm_prefetch(row + b, _MM_HINT_T0);
  }
}

inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

inline float hmax(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

// 2^x for x <= 0 (softmax weights): 2^round(x) * p(x - round(x)), p the degree-7
// Taylor polynomial of 2^f on [-0.5, 0.5] (relative error < 1e-8, p(0) == 1 exactly,
// so the largest score of a row gets weight exactly 1). x < -125 gives 0 (those
// weights are below 2^-125 of the row's largest and cannot change a float sum);
// NaN stays NaN.
inline __m256 exp2_nonpositive(__m256 x) {
  const __m256 lowest = _mm256_set1_ps(-125.0f);
  const __m256 underflow = _mm256_cmp_ps(x, lowest, _CMP_LT_OQ);
  x = _mm256_max_ps(lowest, x);  // a NaN x is returned as is
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(1.5252733804059840e-05f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.5403530393381608e-04f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076284772e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108664821580e-02f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650695910071e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718055994531e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  const __m256i scale = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
  const __m256 r = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), scale));
  return _mm256_andnot_ps(underflow, r);
}

// Eight fp8 values widened to half precision bit patterns: e5m2 is the top byte of
// an f16; e4m3 moves its exponent and mantissa into the f16 fields, which leaves the
// value 2^-8 too small (bias 15 instead of 7; the caller multiplies by 256).
inline __m128i e4m3_to_f16_bits(__m128i bytes16) {
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(bytes16, _mm_set1_epi16(0x80)), 8);
  const __m128i mag = _mm_slli_epi16(_mm_and_si128(bytes16, _mm_set1_epi16(0x7F)), 7);
  return _mm_or_si128(sign, mag);
}

// bf16 widened in pairs: a 32-bit lane holds elements 2i (low half) and 2i + 1 (high
// half), so one load, one shift and one AND give the even elements (0, 2, ..., 14)
// and the odd ones (1, 3, ..., 15) as floats, where widening each half costs a
// shuffle and a shift. Dot products do not mind the order (q is split the same way);
// sums of rows are split on the way in and merged on the way out.
inline void load16_bf16_split(const void* src, __m256& even, __m256& odd) {
  const __m256i x = _mm256_loadu_si256(static_cast<const __m256i*>(src));
  even = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  odd = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// 16 floats (lo = 0..7, hi = 8..15) as their even and odd elements, and back.
inline void split_even_odd(__m256 lo, __m256 hi, __m256& even, __m256& odd) {
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}
inline void merge_even_odd(__m256 even, __m256 odd, __m256& lo, __m256& hi) {
  const __m256 a = _mm256_unpacklo_ps(even, odd), b = _mm256_unpackhi_ps(even, odd);
  lo = _mm256_permute2f128_ps(a, b, 0x20);
  hi = _mm256_permute2f128_ps(a, b, 0x31);
}

// Eight elements of a row in `dtype`, widened to float32 exactly.
inline __m256 load8(const void* src, DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(src)));
    case DType::kBF16:
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(src))), 16));
    case DType::kE4M3: {
      const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(static_cast<const __m128i*>(src)));
      const __m256 x = _mm256_mul_ps(_mm256_cvtph_ps(e4m3_to_f16_bits(b)), _mm256_set1_ps(256.0f));
      // e4m3 has no infinities; S.1111.111 is its NaN.
      const __m128i nan16 = _mm_cmpeq_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7F)), _mm_set1_epi16(0x7F));
      const __m256 nan = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan16));
      return _mm256_blendv_ps(x, _mm256_set1_ps(__builtin_nanf("")), nan);
    }
    case DType::kE5M2: {
      const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(static_cast<const __m128i*>(src)));
      return _mm256_cvtph_ps(_mm_slli_epi16(b, 8));
    }
    default:
      return _mm256_loadu_ps(static_cast<const float*>(src));
  }
}

}  // namespace
}  // namespace kvinfer::cpu::avx2
