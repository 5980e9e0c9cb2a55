// SPDX-License-Identifier: Apache-2.0
// The two products of a warp's m16 row tiles on mma.sync (m16n8k16), operands by
// ldmatrix from swizzled shared memory: S = Q K^T into fresh accumulators, and
// O += P V with P taken from the S accumulators as A fragments (p_fragment).
#pragma once

#include <cstdint>

#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/common/mma.cuh"

namespace kvinfer::cuda {

// S = Q K^T of kMmaM m16 row tiles against kKeys keys. q_lane and k_lane are the
// lane's ldmatrix addresses: Q as the A operand (rows lane % 16, k-chunk + lane / 16),
// K as the B operand (keys lane % 8 + 8 (lane / 16), k-chunk + (lane / 8) % 2), the K
// tile k_off bytes into the stages.
template <class T, int kMmaM, int kKeys, int DQK>
__device__ __forceinline__ void warp_qk(float (&s)[kMmaM][kKeys / 8][4], const SwizzledLane<DQK>& q_lane,
                                        const SwizzledLane<DQK>& k_lane, unsigned k_off) {
#pragma unroll
  for (int m = 0; m < kMmaM; ++m)
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < DQK / 16; ++kk) {
    std::uint32_t a[kMmaM][4];
#pragma unroll
    for (int m = 0; m < kMmaM; ++m) mma::ldmatrix_x4(a[m], q_lane.at(m * 16, 2 * kk));
#pragma unroll
    for (int np = 0; np < kKeys / 16; ++np) {
      std::uint32_t b[4];
      mma::ldmatrix_x4(b, k_lane.at(16 * np, 2 * kk, k_off));
#pragma unroll
      for (int m = 0; m < kMmaM; ++m) {
        mma::m16n8k16<T>(s[m][2 * np], a[m], b[0], b[1]);
        mma::m16n8k16<T>(s[m][2 * np + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// O += P V, P (the softmax's probabilities in the S accumulators) as A fragments, V
// as the transposed B operand (keys lane % 8 + 8 ((lane / 8) % 2), d-chunk + lane / 16),
// the V tile v_off bytes into the stages; kVoFrags columns of 8 from v_lane's first
// chunk (all of V's, or a column slice's).
template <class T, int kMmaM, int kKeys, int DVO, int kVoFrags = DVO / 8>
__device__ __forceinline__ void warp_pv(float (&o)[kMmaM][kVoFrags][4], const float (&s)[kMmaM][kKeys / 8][4],
                                        const SwizzledLane<DVO>& v_lane, unsigned v_off) {
#pragma unroll
  for (int j = 0; j < kKeys / 16; ++j) {
    std::uint32_t pa[kMmaM][4];
#pragma unroll
    for (int m = 0; m < kMmaM; ++m) p_fragment<T>(s[m], j, pa[m]);
#pragma unroll
    for (int c = 0; c < kVoFrags; c += 2) {
      std::uint32_t b[4];
      mma::ldmatrix_x4_trans(b, v_lane.at(16 * j, c, v_off));
#pragma unroll
      for (int m = 0; m < kMmaM; ++m) {
        mma::m16n8k16<T>(o[m][c], pa[m], b[0], b[1]);
        mma::m16n8k16<T>(o[m][c + 1], pa[m], b[2], b[3]);
      }
    }
  }
}

}  // namespace kvinfer::cuda
