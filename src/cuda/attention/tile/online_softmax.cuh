// SPDX-License-Identifier: Apache-2.0
// The per-tile softmax of the mma.sync families (accumulators in the m16n8 C layout):
// per-element masking of partial tiles, the online base-2 softmax, the rescale of O,
// and P as the A operand of O += P V.
#pragma once

#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>
#include "core/mask_policy.hpp"
#include "cuda/attention/tile/math.cuh"
#include "cuda/common/mma.cuh"

namespace kvinfer::cuda {

// Reduces N values pairwise (depth log2 N instead of a chain of N dependent
// operations: the row max and sum are on the critical path of every tile). The
// levels are unrolled by recursion on a compile-time stride: as a loop over the
// stride, the compiler keeps 16 values (128-key tiles) in a local-memory array.
template <int kStride, int N, class Op>
__device__ __forceinline__ void tree_reduce_level(float (&x)[N], Op op) {
  if constexpr (kStride >= 1) {
#pragma unroll
    for (int i = 0; i < kStride; ++i) x[i] = op(x[i], x[i + kStride]);
    tree_reduce_level<kStride / 2>(x, op);
  }
}
template <int N, class Op>
__device__ __forceinline__ float tree_reduce(float (&x)[N], Op op) {
  static_assert((N & (N - 1)) == 0, "a power of two");
  tree_reduce_level<N / 2>(x, op);
  return x[0];
}

// Hides the scores of keys a row may not see (per element: for tiles the mask
// classifies as partial), and of keys outside [key_lo, key_end). s holds a warp's
// kMmaM m16 tiles of kKeyFrags n8 fragments; tok[m][h] is the token of this thread's
// row g + 8h of m16 tile m.
template <bool kGeneral, int kMmaM, int kKeyFrags>
__device__ __forceinline__ void mask_scores(float (&s)[kMmaM][kKeyFrags][4], const detail::RequestMask& mask,
                                            const int (&tok)[kMmaM][2], int key0, int key_end, int lane,
                                            int key_lo = 0) {
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
    // The row's visible keys of this tile (before the custom mask) as columns [lo, hi).
    int lo[2], hi[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      lo[h] = max(mask.first_key(tok[m][h]), key_lo) - key0;
      hi[h] = min(mask.last_key(tok[m][h]), key_end) - key0;
    }
#pragma unroll
    for (int n = 0; n < kKeyFrags; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2, col = 8 * n + 2 * (lane % 4) + e % 2;
        const bool hidden = col < lo[h] || col >= hi[h] ||
                            (kGeneral && mask.custom && !mask.custom_bit(tok[m][h], key0 + col));
        if (hidden) s[m][n][e] = -INFINITY;
      }
  }
}

// Online softmax of one key tile in base 2: turns the scores s (scaled by sc in the
// exponent) into probabilities against the updated running row maxima, folds their
// sums into row_sum, and gives the factor by which each row's O must be rescaled.
// A row lives in the 4 lanes of a quad. Returns whether any rescale of the warp
// differs from 1 (exactly 1 when a row's maximum did not move).
template <int kMmaM, int kKeyFrags>
__device__ __forceinline__ bool online_softmax(float (&s)[kMmaM][kKeyFrags][4], float (&row_max)[kMmaM][2],
                                               float (&row_sum)[kMmaM][2], float (&rescale)[kMmaM][2], float sc) {
  bool changed = false;
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float part[kKeyFrags];
#pragma unroll
      for (int n = 0; n < kKeyFrags; ++n) part[n] = fmaxf(s[m][n][2 * h], s[m][n][2 * h + 1]);
      float mx = tree_reduce(part, [](float x, float y) { return fmaxf(x, y); });
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(row_max[m][h], mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // all masked so far: keep zeros, no NaN
      const float m_scaled = m_use * sc;
      // Exactly 1 when the maximum did not move (the skipped multiplies rely on it).
      rescale[m][h] = exp2_approx((row_max[m][h] - m_use) * sc);
      changed |= m_new != row_max[m][h];
      row_max[m][h] = m_new;
#pragma unroll
      for (int n = 0; n < kKeyFrags; ++n) {
        s[m][n][2 * h] = exp2_approx(fmaf(s[m][n][2 * h], sc, -m_scaled));
        s[m][n][2 * h + 1] = exp2_approx(fmaf(s[m][n][2 * h + 1], sc, -m_scaled));
        part[n] = s[m][n][2 * h] + s[m][n][2 * h + 1];
      }
      row_sum[m][h] = row_sum[m][h] * rescale[m][h] + tree_reduce(part, [](float x, float y) { return x + y; });
    }
  }
  // Once the running maxima settle (most tiles of a long row), the rescale is exactly
  // 1 for the whole warp and the caller skips the multiplies.
  return __any_sync(0xffffffffu, changed);
}

// The state before the first key tile: O zero, no row maximum, no sum.
template <int kMmaM, int kVoFrags>
__device__ __forceinline__ void zero_softmax_state(float (&o)[kMmaM][kVoFrags][4], float (&row_max)[kMmaM][2],
                                                   float (&row_sum)[kMmaM][2]) {
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int c = 0; c < kVoFrags; ++c) o[m][c][0] = o[m][c][1] = o[m][c][2] = o[m][c][3] = 0.0f;
    row_max[m][0] = row_max[m][1] = -INFINITY;
    row_sum[m][0] = row_sum[m][1] = 0.0f;
  }
}

// O rows times their rescale factors.
template <int kMmaM, int kVoFrags>
__device__ __forceinline__ void rescale_rows(float (&o)[kMmaM][kVoFrags][4], const float (&rescale)[kMmaM][2]) {
#pragma unroll
  for (int m = 0; m < kMmaM; ++m)
#pragma unroll
    for (int c = 0; c < kVoFrags; ++c) {
      o[m][c][0] *= rescale[m][0];
      o[m][c][1] *= rescale[m][0];
      o[m][c][2] *= rescale[m][1];
      o[m][c][3] *= rescale[m][1];
    }
}

// The A fragment of P for keys [16 j, 16 j + 16): the S accumulators of n8 blocks 2j
// and 2j + 1 (C layout) are exactly the m16n8k16 A layout once rounded to T.
template <class T, int kKeyFrags>
__device__ __forceinline__ void p_fragment(const float (&s)[kKeyFrags][4], int j, std::uint32_t (&a)[4]) {
  a[0] = mma::pack2<T>(s[2 * j][0], s[2 * j][1]);
  a[1] = mma::pack2<T>(s[2 * j][2], s[2 * j][3]);
  a[2] = mma::pack2<T>(s[2 * j + 1][0], s[2 * j + 1][1]);
  a[3] = mma::pack2<T>(s[2 * j + 1][2], s[2 * j + 1][3]);
}

// A row's sum over the quad of lanes that hold its accumulator columns.
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

}  // namespace kvinfer::cuda
