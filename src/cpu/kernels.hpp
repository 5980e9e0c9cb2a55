// SPDX-License-Identifier: Apache-2.0
// The CPU backend's inner loops: dtype conversion of rows and the three steps of
// attending one block of keys (scores, online softmax, weighted sum of values).
// Key and value rows are passed as pointers in their storage dtype, so that few
// query rows (decode) read the paged cache directly, converting as they go, while
// many (prefill) pass rows converted to float32 once per block.
// One implementation per instruction set; kernels() returns the one of cpu_isa().
#pragma once

#include <cstdint>

#include "cpu/isa.hpp"
#include "kvinfer/core/dtype.hpp"

namespace kvinfer::cpu {

// Row and column strides are in elements. Score rows hold `keys` values padded with
// -inf up to keys_padded(keys), so that vector loops need no tail. Row lengths
// (`dim`) are at most kMaxDim, the widest head the attention wrappers accept.
inline constexpr std::int64_t kMaxDim = 512;
constexpr std::int64_t keys_padded(std::int64_t keys) {
  return (keys + 7) / 8 * 8;
}

// Rows of a later key block to bring into the cache while a kernel runs. Kernels
// spread the prefetches over their iterations, so that the loads overlap the
// arithmetic instead of queueing in one burst (a burst fills the miss buffers and
// stalls the core until it drains).
struct PrefetchRows {
  const void* const* rows = nullptr;
  std::int64_t count = 0;
  std::int64_t row_bytes = 0;
};

// The kernels' signatures, declared once: the table holds pointers to them and each
// instruction set's namespace below declares its functions by them.
// out[i] = float(src[i]) for i < n; src has dtype f32, f16, bf16, e4m3 or e5m2.
using LoadRowFn = void(const void* src, DType dtype, float* out, std::int64_t n);
// dst[i] = dtype(in[i]), rounded to nearest even (as kvinfer::f32_to_*).
using StoreRowFn = void(const float* in, DType dtype, void* dst, std::int64_t n);
// s[i, j] = q[i] . k_rows[j] for i < rows, j < keys; key rows in k_dtype (f32 for rows
// converted beforehand); dim % 16 == 0.
using BlockScoresFn = void(const float* q, std::int64_t ldq, std::int64_t rows, const void* const* k_rows,
                           DType k_dtype, std::int64_t keys, std::int64_t dim, float* s, std::int64_t lds,
                           const PrefetchRows& prefetch);
// One online-softmax step over base-2 scores s [rows, keys_padded(keys)] (-inf =
// masked), per row i with running max m[i] and sum d[i]: the block's weights
// 2^(s - m_new) replace s, rescale[i] = 2^(m[i] - m_new) is what earlier sums are
// multiplied by, and m, d are updated. A row without a visible key in the block
// gets weights 0, rescale 1 and keeps m, d. A NaN or +inf score poisons its row
// (the NaN rule of kvinfer/attention/options.hpp): weights 0, rescale, m and d
// NaN, so that the accumulator turns NaN; a poisoned row (d NaN) then gets weights
// 0 and rescale 1 in every later block.
using BlockSoftmaxFn = void(float* s, std::int64_t lds, std::int64_t rows, std::int64_t keys, float* m, float* d,
                            float* rescale);
// acc[i] = acc[i] * rescale[i] + sum_j w[i, j] v_rows[j] for i < rows, j < keys; value
// rows in v_dtype; dim % 16 == 0. A key of weight 0 adds nothing to a row, whatever
// its value row holds (0 * NaN is never formed).
using BlockAccumulateFn = void(const float* w, std::int64_t ldw, std::int64_t rows, const void* const* v_rows,
                               DType v_dtype, std::int64_t keys, std::int64_t dim, float* acc, std::int64_t lda,
                               const float* rescale, const PrefetchRows& prefetch);

struct CpuKernels {
  LoadRowFn* load_row;
  StoreRowFn* store_row;
  BlockScoresFn* block_scores;
  BlockSoftmaxFn* block_softmax;
  BlockAccumulateFn* block_accumulate;
};

// The table of cpu_isa().
const CpuKernels& kernels();
// The table of one instruction set (tests compare them); kAvx2 needs a processor with it.
const CpuKernels& kernels_for(CpuIsa isa);

namespace portable {
LoadRowFn load_row;
StoreRowFn store_row;
BlockScoresFn block_scores;
BlockSoftmaxFn block_softmax;
BlockAccumulateFn block_accumulate;
}  // namespace portable

// Defined in src/cpu/avx2/ (compiled with -mavx2 -mfma -mf16c); called only when
// the processor has them.
namespace avx2 {
LoadRowFn load_row;
StoreRowFn store_row;
BlockScoresFn block_scores;
BlockSoftmaxFn block_softmax;
BlockAccumulateFn block_accumulate;
}  // namespace avx2

}  // namespace kvinfer::cpu
