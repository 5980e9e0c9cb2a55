// SPDX-License-Identifier: Apache-2.0
// AVX2 + FMA block steps of attention (cpu/kernels.hpp). Register tiles: scores
// as 4 query rows x 2 keys of 8-wide partial dot products (8 independent FMA chains,
// enough to cover the FMA latency on two pipes; each key vector widened once for 4
// rows); the weighted sum of values as 4 rows x 16 dims (8 accumulators, each value
// vector widened once for 4 rows). Both keep 11 of the 16 ymm registers busy, so
// nothing spills. Templates on the storage dtype keep the widening inline.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cpu/avx2/simd.hpp"
#include "cpu/kernels.hpp"

namespace kvinfer::cpu::avx2 {
namespace {

constexpr int kRowTile = 4;

// A block's rows as register tiles: f(std::integral_constant<int, R>{}, i, pf) for the
// tile of R rows from row i, kRowTile rows each and the 1-3 left over as one tile.
// The prefetches (pf, null for none) go with the first tile only.
template <class F>
inline void for_row_tiles(std::int64_t rows, const PrefetchRows& prefetch, F&& f) {
  const PrefetchRows* pf = prefetch.count > 0 ? &prefetch : nullptr;
  std::int64_t i = 0;
  for (; i + kRowTile <= rows; i += kRowTile, pf = nullptr) f(std::integral_constant<int, kRowTile>{}, i, pf);
  switch (rows - i) {
    case 3:
      return f(std::integral_constant<int, 3>{}, i, pf);
    case 2:
      return f(std::integral_constant<int, 2>{}, i, pf);
    case 1:
      return f(std::integral_constant<int, 1>{}, i, pf);
    default:
      return;
  }
}

// s[r, c] = the horizontal sum of acc[r][c].
template <int R, int C>
inline void store_sums(__m256 (&acc)[R][C], float* s, std::int64_t lds) {
  if constexpr (R == 4 && C == 2) {
    // The eight horizontal sums at once: two rounds of pairwise adds leave
    // (r0c0, r0c1, r1c0, r1c1) and (r2c0, ..., r3c1) in the halves of two vectors.
    const __m256 u0 =
        _mm256_hadd_ps(_mm256_hadd_ps(acc[0][0], acc[0][1]), _mm256_hadd_ps(acc[1][0], acc[1][1]));
    const __m256 u1 =
        _mm256_hadd_ps(_mm256_hadd_ps(acc[2][0], acc[2][1]), _mm256_hadd_ps(acc[3][0], acc[3][1]));
    const __m128 v0 = _mm_add_ps(_mm256_castps256_ps128(u0), _mm256_extractf128_ps(u0, 1));
    const __m128 v1 = _mm_add_ps(_mm256_castps256_ps128(u1), _mm256_extractf128_ps(u1, 1));
    _mm_storel_pi(reinterpret_cast<__m64*>(s), v0);
    _mm_storeh_pi(reinterpret_cast<__m64*>(s + lds), v0);
    _mm_storel_pi(reinterpret_cast<__m64*>(s + 2 * lds), v1);
    _mm_storeh_pi(reinterpret_cast<__m64*>(s + 3 * lds), v1);
  } else {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) s[r * lds + c] = hsum(acc[r][c]);
  }
}

// s[r, c] = q[r] . k_rows[c] for R rows and C keys; each 8-element slice of a key row
// is widened once for the R rows. kSplit (bf16 keys only): q is split into even and
// odd elements per 16 (see load16_bf16_split), so that 16 key elements cost one load,
// a shift and an AND.
template <DType T, int R, int C, bool kSplit>
inline void score_tile(const float* q, std::int64_t ldq, const void* const* k_rows, std::int64_t dim,
                       float* s, std::int64_t lds) {
  constexpr std::int64_t kSize = dtype_size(T);
  const char* k[C];
  for (int c = 0; c < C; ++c) k[c] = static_cast<const char*>(k_rows[c]);
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  if constexpr (T == DType::kBF16 && kSplit) {
    for (std::int64_t d = 0; d < dim; d += 16) {
      __m256 ke[C], ko[C];
      for (int c = 0; c < C; ++c) load16_bf16_split(k[c] + d * kSize, ke[c], ko[c]);
      for (int r = 0; r < R; ++r) {
        __m256 qe = _mm256_loadu_ps(q + r * ldq + d), qo = _mm256_loadu_ps(q + r * ldq + d + 8);
        if constexpr (C > 1) __asm__("" : "+x"(qe), "+x"(qo));
        for (int c = 0; c < C; ++c)
          acc[r][c] = _mm256_fmadd_ps(qo, ko[c], _mm256_fmadd_ps(qe, ke[c], acc[r][c]));
      }
    }
  } else {
    for (std::int64_t d = 0; d < dim; d += 8) {
      __m256 kv[C];
      for (int c = 0; c < C; ++c) kv[c] = load8(k[c] + d * kSize, T);
      for (int r = 0; r < R; ++r) {
        __m256 qv = _mm256_loadu_ps(q + r * ldq + d);
        // Keep q in a register: folded into each FMA it would be loaded C times, and
        // the two load ports, not the FMAs, would set the pace.
        if constexpr (C > 1) __asm__("" : "+x"(qv));
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(qv, kv[c], acc[r][c]);
      }
    }
  }
  store_sums<R, C>(acc, s, lds);
}

// The prefetches go with the first row tile's keys, spread evenly over them.
template <DType T, int R, bool kSplit>
inline void score_rows(const float* q, std::int64_t ldq, const void* const* k_rows, std::int64_t keys,
                       std::int64_t dim, float* s, std::int64_t lds, const PrefetchRows* prefetch) {
  std::int64_t j = 0;
  for (; j + 2 <= keys; j += 2) {
    if (prefetch) prefetch_rows(*prefetch, prefetch->count * j / keys, prefetch->count * (j + 2) / keys);
    score_tile<T, R, 2, kSplit>(q, ldq, k_rows + j, dim, s + j, lds);
  }
  if (j < keys) {
    if (prefetch) prefetch_rows(*prefetch, prefetch->count * j / keys, prefetch->count);
    score_tile<T, R, 1, kSplit>(q, ldq, k_rows + j, dim, s + j, lds);
  }
}

template <DType T>
void scores_as(const float* q, std::int64_t ldq, std::int64_t rows, const void* const* k_rows,
               std::int64_t keys, std::int64_t dim, float* s, std::int64_t lds,
               const PrefetchRows& prefetch) {
  // bf16 keys: q split into even and odd elements per 16, as the keys will be (on the
  // stack: decode has at most a few rows; many rows take the generic path).
  constexpr std::int64_t kSplitFloats = 8 * 512;
  alignas(32) float split[kSplitFloats];
  if (T == DType::kBF16 && rows * dim <= kSplitFloats) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t d = 0; d < dim; d += 16) {
        __m256 even, odd;
        split_even_odd(_mm256_loadu_ps(q + r * ldq + d), _mm256_loadu_ps(q + r * ldq + d + 8), even, odd);
        _mm256_store_ps(split + r * dim + d, even);
        _mm256_store_ps(split + r * dim + d + 8, odd);
      }
    }
    for_row_tiles(rows, prefetch, [&](auto tile, std::int64_t i, const PrefetchRows* pf) {
      score_rows<T, decltype(tile)::value, true>(split + i * dim, dim, k_rows, keys, dim, s + i * lds, lds, pf);
    });
    return;
  }
  for_row_tiles(rows, prefetch, [&](auto tile, std::int64_t i, const PrefetchRows* pf) {
    score_rows<T, decltype(tile)::value, false>(q + i * ldq, ldq, k_rows, keys, dim, s + i * lds, lds, pf);
  });
}

// Bit j of the result: some row r < R has weight w[r, j] == 0 (keys j < 32 of
// `keys`). Such a key must not be multiplied into those rows: 0 * NaN is NaN, and a
// masked key's value row may hold anything.
template <int R>
inline std::uint32_t zero_weight_keys(const float* w, std::int64_t ldw, std::int64_t keys) {
  std::uint32_t bits = 0;
  for (std::int64_t j = 0; j < keys; j += 8) {
    __m256 zero = _mm256_setzero_ps();
    for (int r = 0; r < R; ++r)
      zero = _mm256_or_ps(zero, _mm256_cmp_ps(_mm256_loadu_ps(w + r * ldw + j), _mm256_setzero_ps(), _CMP_EQ_OQ));
    bits |= std::uint32_t(_mm256_movemask_ps(zero)) << j;
  }
  return keys >= 32 ? bits : bits & ((1u << keys) - 1u);
}

// The weighted values of key j into the accumulators of R rows: one FMA per row, or,
// for a key that some row gives weight 0, only the rows that weigh it.
template <int R>
inline void add_weighted(__m256 (&a)[R][2], const float* w, std::int64_t ldw, std::int64_t j, bool some_zero,
                         __m256 v0, __m256 v1) {
  for (int r = 0; r < R; ++r) {
    if (some_zero && w[r * ldw + j] == 0.0f) continue;
    const __m256 wr = _mm256_broadcast_ss(w + r * ldw + j);
    a[r][0] = _mm256_fmadd_ps(wr, v0, a[r][0]);
    a[r][1] = _mm256_fmadd_ps(wr, v1, a[r][1]);
  }
}

// acc[r] = acc[r] * rescale[r] + sum_j w[r, j] v_rows[j] for R rows, 16 dims at a time
// (keys <= 32); each 8-element slice of a value row is widened once for the R rows.
// bf16 values: the accumulators are split into even and odd elements on loading and
// merged back on storing, so that 16 value elements cost one load, a shift and an AND.
template <DType T, int R>
inline void accumulate_rows(const float* w, std::int64_t ldw, const void* const* v_rows, std::int64_t keys,
                            std::int64_t dim, float* acc, std::int64_t lda, const float* rescale,
                            const PrefetchRows* prefetch) {
  constexpr std::int64_t kSize = dtype_size(T);
  constexpr bool kSplit = T == DType::kBF16;
  const std::uint32_t zero = zero_weight_keys<R>(w, ldw, keys);
  for (std::int64_t d = 0; d < dim; d += 16) {
    if (prefetch) prefetch_rows(*prefetch, prefetch->count * d / dim, prefetch->count * (d + 16) / dim);
    __m256 a[R][2];
    for (int r = 0; r < R; ++r) {
      const __m256 sc = _mm256_set1_ps(rescale ? rescale[r] : 1.0f);
      const __m256 lo = _mm256_mul_ps(_mm256_loadu_ps(acc + r * lda + d), sc);
      const __m256 hi = _mm256_mul_ps(_mm256_loadu_ps(acc + r * lda + d + 8), sc);
      if constexpr (kSplit) {
        split_even_odd(lo, hi, a[r][0], a[r][1]);
      } else {
        a[r][0] = lo, a[r][1] = hi;
      }
    }
    for (std::int64_t j = 0; j < keys; ++j) {
      const char* v = static_cast<const char*>(v_rows[j]) + d * kSize;
      __m256 v0, v1;
      if constexpr (kSplit) {
        load16_bf16_split(v, v0, v1);
      } else {
        v0 = load8(v, T), v1 = load8(v + 8 * kSize, T);
      }
      add_weighted<R>(a, w, ldw, j, (zero >> j) & 1u, v0, v1);
    }
    for (int r = 0; r < R; ++r) {
      __m256 lo = a[r][0], hi = a[r][1];
      if constexpr (kSplit) merge_even_odd(a[r][0], a[r][1], lo, hi);
      _mm256_storeu_ps(acc + r * lda + d, lo);
      _mm256_storeu_ps(acc + r * lda + d + 8, hi);
    }
  }
}

// Rows of the block in tiles of kRowTile; keys <= 32. rescale may be null (1).
template <DType T>
void accumulate_run(const float* w, std::int64_t ldw, std::int64_t rows, const void* const* v_rows,
                    std::int64_t keys, std::int64_t dim, float* acc, std::int64_t lda, const float* rescale,
                    const PrefetchRows& prefetch) {
  for_row_tiles(rows, prefetch, [&](auto tile, std::int64_t i, const PrefetchRows* pf) {
    accumulate_rows<T, decltype(tile)::value>(w + i * ldw, ldw, v_rows, keys, dim, acc + i * lda, lda,
                                              rescale ? rescale + i : nullptr, pf);
  });
}

// Keys in runs of 32 (the width of the zero-weight bits; the attention kernels pass
// at most 32), the accumulators rescaled with the first.
template <DType T>
void accumulate_as(const float* w, std::int64_t ldw, std::int64_t rows, const void* const* v_rows,
                   std::int64_t keys, std::int64_t dim, float* acc, std::int64_t lda, const float* rescale,
                   const PrefetchRows& prefetch) {
  accumulate_run<T>(w, ldw, rows, v_rows, std::min<std::int64_t>(keys, 32), dim, acc, lda, rescale, prefetch);
  for (std::int64_t j = 32; j < keys; j += 32) {
    accumulate_run<T>(w + j, ldw, rows, v_rows + j, std::min<std::int64_t>(32, keys - j), dim, acc, lda, nullptr,
                      {});
  }
}

}  // namespace

void block_scores(const float* q, std::int64_t ldq, std::int64_t rows, const void* const* k_rows,
                  DType k_dtype, std::int64_t keys, std::int64_t dim, float* s, std::int64_t lds,
                  const PrefetchRows& prefetch) {
  with_row_dtype(k_dtype, [&](auto t) {
    scores_as<decltype(t)::value>(q, ldq, rows, k_rows, keys, dim, s, lds, prefetch);
  });
}

void block_softmax(float* s, std::int64_t lds, std::int64_t rows, std::int64_t keys, float* m, float* d,
                   float* rescale) {
  const std::int64_t n = (keys + 7) / 8 * 8;
  const float neg_inf = -__builtin_inff();
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  for (std::int64_t i = 0; i < rows; ++i) {
    float* si = s + i * lds;
    if (d[i] != d[i]) {  // poisoned by an earlier block: stays NaN
      for (std::int64_t j = 0; j < n; j += 8) _mm256_storeu_ps(si + j, _mm256_setzero_ps());
      rescale[i] = 1.0f;
      continue;
    }
    __m256 mx = _mm256_set1_ps(neg_inf);
    __m256 non_finite = _mm256_setzero_ps();  // NaN or +inf: max_ps would drop a NaN
    for (std::int64_t j = 0; j < n; j += 8) {
      const __m256 x = _mm256_loadu_ps(si + j);
      mx = _mm256_max_ps(mx, x);
      non_finite = _mm256_or_ps(non_finite, _mm256_cmp_ps(x, inf, _CMP_NLT_UQ));
    }
    if (_mm256_movemask_ps(non_finite) != 0) {
      for (std::int64_t j = 0; j < n; j += 8) _mm256_storeu_ps(si + j, _mm256_setzero_ps());
      rescale[i] = m[i] = d[i] = __builtin_nanf("");
      continue;
    }
    const float block_max = hmax(mx);
    if (block_max == neg_inf) {
      for (std::int64_t j = 0; j < n; j += 8) _mm256_storeu_ps(si + j, _mm256_setzero_ps());
      rescale[i] = 1.0f;
      continue;
    }
    const float m_new = m[i] > block_max ? m[i] : block_max;
    rescale[i] = std::exp2(m[i] - m_new);  // 0 while m[i] is -inf
    const __m256 mv = _mm256_set1_ps(m_new);
    __m256 sum = _mm256_setzero_ps();
    for (std::int64_t j = 0; j < n; j += 8) {
      const __m256 w = exp2_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(si + j), mv));
      _mm256_storeu_ps(si + j, w);
      sum = _mm256_add_ps(sum, w);
    }
    d[i] = d[i] * rescale[i] + hsum(sum);
    m[i] = m_new;
  }
}

void block_accumulate(const float* w, std::int64_t ldw, std::int64_t rows, const void* const* v_rows,
                      DType v_dtype, std::int64_t keys, std::int64_t dim, float* acc, std::int64_t lda,
                      const float* rescale, const PrefetchRows& prefetch) {
  with_row_dtype(v_dtype, [&](auto t) {
    accumulate_as<decltype(t)::value>(w, ldw, rows, v_rows, keys, dim, acc, lda, rescale, prefetch);
  });
}

}  // namespace kvinfer::cpu::avx2
