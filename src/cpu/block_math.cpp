// SPDX-License-Identifier: Apache-2.0
// The portable implementation of the block steps of attention (cpu/kernels.hpp):
// plain loops, written so that the compiler can vectorise them without
// -ffast-math (independent partial sums in a fixed order).
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/kernels.hpp"

namespace kvinfer::cpu::portable {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void prefetch_rows(const PrefetchRows& p, std::int64_t first, std::int64_t last) {
  for (std::int64_t i = first; i < last; ++i) {
    const char* row = static_cast<const char*>(p.rows[i]);
    for (std::int64_t b = 0; b < p.row_bytes; b += 64) __builtin_prefetch(row + b);
  }
}

// One row in float32: the row itself, or a conversion into `tmp` (kMaxDim floats).
const float* as_float(const void* row, DType dtype, std::int64_t n, float* tmp) {
  if (dtype == DType::kF32) return static_cast<const float*>(row);
  load_row(row, dtype, tmp, n);
  return tmp;
}

float dot(const float* a, const float* b, std::int64_t n) {
  float acc[8] = {};
  for (std::int64_t d = 0; d < n; d += 8) {
    for (int e = 0; e < 8; ++e) acc[e] += a[d + e] * b[d + e];
  }
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

void block_scores(const float* q, std::int64_t ldq, std::int64_t rows, const void* const* k_rows,
                  DType k_dtype, std::int64_t keys, std::int64_t dim, float* s, std::int64_t lds,
                  const PrefetchRows& prefetch) {
  prefetch_rows(prefetch, 0, prefetch.count);
  float tmp[kMaxDim];
  for (std::int64_t j = 0; j < keys; ++j) {
    const float* kj = as_float(k_rows[j], k_dtype, dim, tmp);
    for (std::int64_t i = 0; i < rows; ++i) s[i * lds + j] = dot(q + i * ldq, kj, dim);
  }
}

void block_softmax(float* s, std::int64_t lds, std::int64_t rows, std::int64_t keys, float* m, float* d,
                   float* rescale) {
  const std::int64_t n = keys_padded(keys);
  for (std::int64_t i = 0; i < rows; ++i) {
    float* si = s + i * lds;
    if (std::isnan(d[i])) {  // poisoned by an earlier block: stays NaN
      std::fill(si, si + n, 0.0f);
      rescale[i] = 1.0f;
      continue;
    }
    float block_max = kNegInf;
    bool non_finite = false;
    for (std::int64_t j = 0; j < n; ++j) {
      non_finite |= !(si[j] < kInf);  // NaN or +inf
      block_max = std::max(block_max, si[j]);
    }
    if (non_finite) {
      std::fill(si, si + n, 0.0f);
      rescale[i] = m[i] = d[i] = kNaN;
      continue;
    }
    if (block_max == kNegInf) {
      std::fill(si, si + n, 0.0f);
      rescale[i] = 1.0f;
      continue;
    }
    const float m_new = std::max(m[i], block_max);
    rescale[i] = std::exp2(m[i] - m_new);  // 0 while m[i] is -inf
    float sum = 0.0f;
    for (std::int64_t j = 0; j < n; ++j) {
      si[j] = std::exp2(si[j] - m_new);
      sum += si[j];
    }
    d[i] = d[i] * rescale[i] + sum;
    m[i] = m_new;
  }
}

void block_accumulate(const float* w, std::int64_t ldw, std::int64_t rows, const void* const* v_rows,
                      DType v_dtype, std::int64_t keys, std::int64_t dim, float* acc, std::int64_t lda,
                      const float* rescale, const PrefetchRows& prefetch) {
  prefetch_rows(prefetch, 0, prefetch.count);
  for (std::int64_t i = 0; i < rows; ++i) {
    if (rescale[i] != 1.0f) {
      for (std::int64_t e = 0; e < dim; ++e) acc[i * lda + e] *= rescale[i];
    }
  }
  float tmp[kMaxDim];
  for (std::int64_t j = 0; j < keys; ++j) {
    const float* vj = as_float(v_rows[j], v_dtype, dim, tmp);
    for (std::int64_t i = 0; i < rows; ++i) {
      const float wij = w[i * ldw + j];
      if (wij == 0.0f) continue;
      float* ai = acc + i * lda;
      for (std::int64_t e = 0; e < dim; ++e) ai[e] += wij * vj[e];
    }
  }
}

}  // namespace kvinfer::cpu::portable
