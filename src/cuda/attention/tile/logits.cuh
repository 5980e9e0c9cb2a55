// SPDX-License-Identifier: Apache-2.0
// The logits transform of the mma.sync families, on a warp's score accumulators (m16n8
// C layout): the thread's rows (token, ALiBi slope), and scale, ALiBi and soft cap in
// base 2. Scores stay raw in the common case and the base-2 scale folds into the
// softmax's exponent (one FFMA per element): LogitsMode says which pass a tile needs.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/mask_policy.hpp"
#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/math.cuh"

namespace kvinfer::cuda {

// This thread's rows of a warp's kMmaM m16 tiles: fragment row g (h = 0) and g + 8
// (h = 1) of tile m, as the request's token and the ALiBi slope of its head
// (kGeneral only). first_row: the warp's first row in the item; rows past the item's
// end repeat its last.
template <int kMmaM>
struct ThreadRows {
  int tok[kMmaM][2];
  float slope[kMmaM][2];
};
template <int kMmaM, bool kGeneral>
__device__ __forceinline__ ThreadRows<kMmaM> thread_rows(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                         int first_row, int lane, int rows) {
  ThreadRows<kMmaM> t;
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = min(first_row + m * 16 + lane / 4 + 8 * h, rows - 1);
      std::uint32_t in_group;
      t.tok[m][h] = int(p.heads.group_div.divmod(std::uint32_t(item.row_begin + i), &in_group));
      t.slope[m][h] = kGeneral && p.logits.alibi_slopes
                          ? __ldg(p.logits.alibi_slopes + item.kv_head * p.heads.group_size + in_group)
                          : 0.0f;
    }
  }
  return t;
}

// How a kernel's scores become base-2 logits. fast: raw scores, the scale sc folded
// into the exponent; prescale: scores scaled first (the general logits, or a negative
// scale from a negative k_scale, which would turn the max into a min).
struct LogitsMode {
  bool fast, prescale;
  float sc;  // the scale the softmax's exponent applies (1 when prescaled)
};
template <bool kGeneral>
__device__ __forceinline__ LogitsMode logits_mode(const AttentionKernelParams& p) {
  const bool fast = !kGeneral || (p.logits.alibi_slopes == nullptr && p.logits.soft_cap <= 0.0f);
  const bool prescale = !fast || p.logits.sm_scale_log2 < 0.0f;
  return {fast, prescale, prescale ? 1.0f : p.logits.sm_scale_log2};
}

// The tile's scores (keys key0 + column) as the mode asks: the general transform
// (scale, ALiBi, soft cap, to base 2) or the base-2 scale alone. Each pass is one
// uniform branch around whole loops, so tiles that skip it issue none of its
// instructions.
template <bool kGeneral, int kMmaM, int kKeyFrags>
__device__ __forceinline__ void transform_logits(float (&s)[kMmaM][kKeyFrags][4], const AttentionKernelParams& p,
                                                 bool fast, bool prescale, const float (&slope)[kMmaM][2],
                                                 const int (&tok)[kMmaM][2], const detail::RequestMask& mask, int key0,
                                                 int lane) {
  if (kGeneral && !fast) {
#pragma unroll
    for (int m = 0; m < kMmaM; ++m)
#pragma unroll
      for (int n = 0; n < kKeyFrags; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2, col = 8 * n + 2 * (lane % 4) + e % 2;
          float x = s[m][n][e] * p.logits.sm_scale;
          if (p.logits.alibi_slopes) x += slope[m][h] * float(key0 + col - mask.diagonal(tok[m][h]));
          if (p.logits.soft_cap > 0.0f) x = p.logits.soft_cap * tanhf(x / p.logits.soft_cap);
          s[m][n][e] = x * kLog2e;
        }
  } else if (prescale) {
#pragma unroll
    for (int m = 0; m < kMmaM; ++m)
#pragma unroll
      for (int n = 0; n < kKeyFrags; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[m][n][e] *= p.logits.sm_scale_log2;
  }
}

}  // namespace kvinfer::cuda
