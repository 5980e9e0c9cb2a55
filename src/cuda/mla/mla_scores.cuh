// SPDX-License-Identifier: Apache-2.0
// The logits S = Q K^T of an MLA key tile and their exchange through shared memory.
// The warps split S by (row block, 8 keys) units, not by the row blocks whose softmax
// and P V they run, so every warp writes its partial S to the exchange and reads its
// row block's back after a barrier. Included by mla_kernel.cuh.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/common/mma.cuh"

namespace kvinfer::cuda {

// The S role of a warp: its units (8 keys each, from fragment frag0) of row block rb,
// over the k-steps of part kpart.
template <class S>
struct MlaScoreWarp {
  int kpart, rb, frag0;
  SwizzledLane<S::kDqk> q_lane;
  // Lane addresses of K: one unit reads two k-steps of one fragment per ldmatrix.x4
  // (chunks c..c+3), two units one k-step of two fragments (rows 0-15, chunks c, c+1).
  int k_lane_row, k_lane_chunk;
  __device__ __forceinline__ MlaScoreWarp(const unsigned char* q_tile, int warp, int lane)
      : kpart(warp % S::kKParts),
        rb((warp / S::kKParts) * S::kUnitsPerWarp / S::kKeyFrags),
        frag0((warp / S::kKParts) * S::kUnitsPerWarp % S::kKeyFrags),
        q_lane(q_tile, lane % 16, lane / 16),
        k_lane_row(S::kUnitsPerWarp == 1 ? (lane & 7) : (lane & 7) + 8 * (lane >> 4)),
        k_lane_chunk(S::kUnitsPerWarp == 1 ? (lane >> 3) : ((lane >> 3) & 1)) {}
};

// Calls f(std::integral_constant<int, k>{}) for the even k-steps k of the warp's part,
// the part fixed at compile time: a run-time test of each step's part kept ptxas from
// issuing one step's loads under the previous step's mma (the 16-row tile's warps
// waited on shared memory in 27% of their stall samples, on the mma chain in 25%).
template <class S, class F>
__device__ __forceinline__ void mla_part_steps(int kpart, F&& f) {
  static_assert(S::kKParts == 1 || S::kKParts == 2);
  const auto part = [&]<int kPart>() {
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (f(std::integral_constant<int, kPart * S::kPartSteps + 2 * I>{}), ...);
    }(std::make_integer_sequence<int, S::kPartSteps / 2>{});
  };
  if constexpr (S::kKParts == 1) {
    part.template operator()<0>();
  } else if (kpart == 0) {
    part.template operator()<0>();
  } else {
    part.template operator()<1>();
  }
}

// Where a warp holds one unit, odd k-steps accumulate apart from even ones (two chains
// of dependent mma instead of one; summed at the end); with two units the units are
// the two chains.
template <class S>
inline constexpr bool kMlaOddChain = S::kUnitsPerWarp == 1;

// The end of a warp's S: the odd chain summed in (kMlaOddChain), then the nope and pe
// terms each times its scale (v: a unit's sum) into the exchange, part kpart's rows of s_buf.
template <class S, class Role>
__device__ __forceinline__ void mla_store_scores(const Role& role, float (&sacc)[S::kUnitsPerWarp][2][4],
                                                 const float (&odd)[2][4], float (&v)[4], float* s_buf,
                                                 float nope_scale, float pe_scale, int g, int t) {
  if constexpr (kMlaOddChain<S>) {
#pragma unroll
    for (int pe = 0; pe < 2; ++pe)
#pragma unroll
      for (int i = 0; i < 4; ++i) sacc[0][pe][i] += odd[pe][i];
  }
#pragma unroll
  for (int u = 0; u < S::kUnitsPerWarp; ++u) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      v[i] = sacc[u][0][i] * nope_scale + (S::kKpe ? sacc[u][1][i] * pe_scale : 0.0f);
    float* at =
        s_buf + (role.kpart * S::kRows + role.rb * 16 + g) * S::kSStride + 8 * (role.frag0 + u) + 2 * t;
    *reinterpret_cast<float2*>(at) = make_float2(v[0], v[1]);
    *reinterpret_cast<float2*>(at + 8 * S::kSStride) = make_float2(v[2], v[3]);
  }
}

// S = Q K^T of the warp's units over its part of the k-steps, accumulated in sacc
// ([unit][nope / pe][fragment], zero on entry), then the nope and pe terms each times
// its scale (v: a unit's sum) into the exchange: part kpart's rows of s_buf.
template <class T, class S>
__device__ __forceinline__ void mla_scores(const MlaScoreWarp<S>& role, const unsigned char* kv,
                                           float (&sacc)[S::kUnitsPerWarp][2][4], float (&v)[4], float* s_buf,
                                           float nope_scale, float pe_scale, int g, int t) {
  const SwizzledLane<S::kDqk> k_lane(kv, role.k_lane_row, role.k_lane_chunk);
  float odd[2][4] = {};
  mla_part_steps<S>(role.kpart, [&](auto step) {
    constexpr int k = decltype(step)::value;
    constexpr int pe = k >= S::kNopeSteps ? 1 : 0;
    std::uint32_t a0[4], a1[4];
    mma::ldmatrix_x4(a0, role.q_lane.at(role.rb * 16, 2 * k));
    mma::ldmatrix_x4(a1, role.q_lane.at(role.rb * 16, 2 * k + 2));
    if constexpr (S::kUnitsPerWarp == 1) {
      std::uint32_t b[4];
      mma::ldmatrix_x4(b, k_lane.at(8 * role.frag0, 2 * k));
      mma::m16n8k16<T>(sacc[0][pe], a0, b[0], b[1]);
      mma::m16n8k16<T>(odd[pe], a1, b[2], b[3]);
    } else {
      std::uint32_t b[4], b1[4];
      mma::ldmatrix_x4(b, k_lane.at(8 * role.frag0, 2 * k));
      mma::ldmatrix_x4(b1, k_lane.at(8 * role.frag0, 2 * k + 2));
      mma::m16n8k16<T>(sacc[0][pe], a0, b[0], b[1]);
      mma::m16n8k16<T>(sacc[1][pe], a0, b[2], b[3]);
      mma::m16n8k16<T>(sacc[0][pe], a1, b1[0], b1[1]);
      mma::m16n8k16<T>(sacc[1][pe], a1, b1[2], b1[3]);
    }
  });
  mla_store_scores<S>(role, sacc, odd, v, s_buf, nope_scale, pe_scale, g, t);
}

// Row block rb's S of the tile from the exchange, the parts summed:
// s[j][e * 4 + h * 2 + x]: row g + 8h, key 16j + 8e + 2t + x: the A-fragment order.
template <class S>
__device__ __forceinline__ void mla_read_scores(float (&s)[2][8], const float* s_buf, int rb, int g, int t) {
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float2 x = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int kp = 0; kp < S::kKParts; ++kp) {
          const float2 y = *reinterpret_cast<const float2*>(
              s_buf + (kp * S::kRows + rb * 16 + g + 8 * h) * S::kSStride + 16 * j + 8 * e + 2 * t);
          x.x += y.x;
          x.y += y.y;
        }
        s[j][e * 4 + h * 2] = x.x;
        s[j][e * 4 + h * 2 + 1] = x.y;
      }
}

}  // namespace kvinfer::cuda
