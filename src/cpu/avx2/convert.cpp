// SPDX-License-Identifier: Apache-2.0
// AVX2 / F16C row conversions: 8 elements per step, the scalar conversions of
// kvinfer/core/float_convert.hpp for tails (and for fp8 stores, which only
// tests and tools use). Bit-identical to the portable ones.
#include "cpu/avx2/simd.hpp"
#include "cpu/kernels.hpp"
#include "kvinfer/core/float_convert.hpp"

namespace kvinfer::cpu::avx2 {
namespace {

template <DType kDType>
void load_row_as(const void* src, float* out, std::int64_t n) {
  const auto* s = static_cast<const unsigned char*>(src);
  constexpr std::int64_t kSize = dtype_size(kDType);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load8(s + i * kSize, kDType));
  for (; i < n; ++i) {
    const unsigned char* e = s + i * kSize;
    switch (kDType) {
      case DType::kF16:
        out[i] = f16_to_f32(*reinterpret_cast<const std::uint16_t*>(e));
        break;
      case DType::kBF16:
        out[i] = bf16_to_f32(*reinterpret_cast<const std::uint16_t*>(e));
        break;
      case DType::kE4M3:
        out[i] = e4m3_to_f32(*e);
        break;
      case DType::kE5M2:
        out[i] = e5m2_to_f32(*e);
        break;
      default:
        out[i] = *reinterpret_cast<const float*>(e);
        break;
    }
  }
}

// float32 -> bf16, round to nearest even on the bits; a NaN keeps its sign and the
// top of its payload and is made quiet, as kvinfer::f32_to_bf16.
inline __m128i bf16_rne8(__m256 x) {
  const __m256i b = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i abs = _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F800000));
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x0040));
  const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
  // Pack the eight 32-bit lanes (all < 2^16) into eight 16-bit values.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(packed);
}

}  // namespace

void load_row(const void* src, DType dtype, float* out, std::int64_t n) {
  if (!is_float(dtype)) return;
  with_row_dtype(dtype, [&](auto t) { load_row_as<decltype(t)::value>(src, out, n); });
}

void store_row(const float* in, DType dtype, void* dst, std::int64_t n) {
  std::int64_t i = 0;
  switch (dtype) {
    case DType::kF32: {
      auto* d = static_cast<float*>(dst);
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_loadu_ps(in + i));
      for (; i < n; ++i) d[i] = in[i];
      return;
    }
    case DType::kF16: {
      // vcvtps2ph rounds to nearest even, overflows to inf and quiets NaNs keeping
      // the top of the payload: what f32_to_f16 does.
      auto* d = static_cast<std::uint16_t*>(dst);
      for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
      }
      for (; i < n; ++i) d[i] = f32_to_f16(in[i]);
      return;
    }
    case DType::kBF16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), bf16_rne8(_mm256_loadu_ps(in + i)));
      for (; i < n; ++i) d[i] = f32_to_bf16(in[i]);
      return;
    }
    case DType::kE4M3: {
      auto* d = static_cast<std::uint8_t*>(dst);
      for (; i < n; ++i) d[i] = f32_to_e4m3(in[i]);
      return;
    }
    case DType::kE5M2: {
      auto* d = static_cast<std::uint8_t*>(dst);
      for (; i < n; ++i) d[i] = f32_to_e5m2(in[i]);
      return;
    }
    default:
      return;
  }
}

}  // namespace kvinfer::cpu::avx2
