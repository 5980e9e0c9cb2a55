// SPDX-License-Identifier: Apache-2.0
// The O role of an MLA warp: the online softmax of its row block over a key tile's S
// and O += P V for its slice of the 512 value columns. The warps of one row block
// each run the same softmax on the same S (no reduction across warps, here or at the
// end), so the role's state is the warp's own. The arrays are the kernel's, passed
// in (mla_kernel.cuh says why). Included by mla_kernel.cuh.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/attention/tile/math.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/common/mma.cuh"

namespace kvinfer::cuda {

// The state of the O role's rows before the first tile: no key seen, O zero.
template <int kOFrags>
__device__ __forceinline__ void mla_zero_state(float (&row_max)[2], float (&row_sum)[2],
                                               float (&acc)[kOFrags][4]) {
  row_max[0] = row_max[1] = -INFINITY;
  row_sum[0] = row_sum[1] = 0.0f;
#pragma unroll
  for (int n = 0; n < kOFrags; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

// Masks the scores of the tile's keys (from key0) that a row does not see: those from
// lim[h] on for the lane's rows g + 8h.
__device__ __forceinline__ void mla_mask_scores(float (&s)[2][8], const int (&lim)[2], int key0, int t) {
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int key = key0 + 16 * j + 8 * (i / 4) + 2 * t + (i & 1);
      if (key >= lim[(i / 2) & 1]) s[j][i] = -INFINITY;
    }
}

// The online softmax of the tile's scores: the rows' maxima move on (O and the sums
// rescaled; base: the maxima the weights are taken against), and the weights w become
// P as the A operand, one fragment per 16 keys; each lane sums its own weights (the
// row's four lanes are summed once, at the end).
template <class T, int kOFrags>
__device__ __forceinline__ void mla_softmax(const float (&s)[2][8], float (&base)[2], float (&w)[8],
                                            std::uint32_t (&a)[2][4], float (&row_max)[2],
                                            float (&row_sum)[2], float (&acc)[kOFrags][4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = row_max[h];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) mx = fmaxf(mx, fmaxf(s[j][e * 4 + h * 2], s[j][e * 4 + h * 2 + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    base[h] = mx == -INFINITY ? 0.0f : mx;  // a row that has seen no key yet keeps weights 0
    const float rescale = exp2_approx(row_max[h] - base[h]);
    row_max[h] = mx;
    row_sum[h] *= rescale;
#pragma unroll
    for (int n = 0; n < kOFrags; ++n) {
      acc[n][2 * h] *= rescale;
      acc[n][2 * h + 1] *= rescale;
    }
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = exp2_approx(s[j][i] - base[(i / 2) & 1]);
#pragma unroll
    for (int i = 0; i < 4; ++i) a[j][i] = mma::pack2<T>(w[2 * i], w[2 * i + 1]);
    row_sum[0] += (w[0] + w[1]) + (w[4] + w[5]);
    row_sum[1] += (w[2] + w[3]) + (w[6] + w[7]);
  }
}

// O += P V over the columns [c0 * 8, c0 * 8 + kCols). V: the tile's first 512
// columns, read transposed (lanes 0-15: keys 0-15 of chunk c, lanes 16-31: of chunk
// c + 1).
template <class T, class S>
__device__ __forceinline__ void mla_pv(float (&acc)[S::kOFrags][4], const std::uint32_t (&a)[2][4],
                                       const unsigned char* kv, int c0, int lane) {
  const SwizzledLane<S::kDqk> v_lane(kv, (lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4);
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int n = 0; n < S::kOFrags; n += 2) {
      std::uint32_t b[4];
      mma::ldmatrix_x4_trans(b, v_lane.at(16 * j, c0 + n));
      mma::m16n8k16<T>(acc[n], a[j], b[0], b[1]);
      mma::m16n8k16<T>(acc[n + 1], a[j], b[2], b[3]);
    }
}

}  // namespace kvinfer::cuda
