// SPDX-License-Identifier: Apache-2.0
// Item warps: the decode tile's CTA may run one work item on W warps
// (Schedule::item_warps), each warp the one-warp tile over every W-th of the item's
// 16-key tiles (warp w: tiles w, w + W, ...) with its own shared memory. Where a request's keys would otherwise be split
// into W chunks, its partial states then meet in the CTA's shared memory instead of
// global memory and a merge kernel: each warp leaves its normalised state in its
// K/V stages (free once its last tile is done) and the CTA's threads merge them into
// the output, or into the item's partial state where the request still has several
// chunks.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/math.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"

namespace kvinfer::cuda {

// The most warps of one item's CTA: one CTA of 8 such warps fills an SM's register
// file as 8 one-warp CTAs of the tile do.
inline constexpr int kMaxItemWarps = 8;

// Host: the most item warps (a power of two, at most kMaxItemWarps) whose tiles of
// tile_bytes of shared memory each one CTA may hold on the current device.
inline int item_warps_fitting(int tile_bytes) {
  int device = 0, optin = 0;
  KVINFER_CUDA_CHECK(cudaGetDevice(&device));
  KVINFER_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  int w = kMaxItemWarps;
  while (w > 1 && w * tile_bytes > optin) w /= 2;
  return w;
}

// Host: the planner's warp slots per multiprocessor for a tile that runs one-warp CTAs
// (`one_warp`, one_bytes of shared memory) or CTAs of up to max_warps item warps
// (`item_kernel`, tile_bytes per warp): the fewer resident warps of the two, so that
// a plan of one wave is one wave with either kernel. (Counting only the one-warp
// kernel's, where the item-warp kernel needs more registers per warp, gave plans of
// 1.5 waves and split requests that one wave of item warps covers whole.)
template <class OneWarp, class ItemKernel>
int item_warp_slots(OneWarp one_warp, int one_bytes, ItemKernel item_kernel, int max_warps, int tile_bytes) {
  int one = 0;
  KVINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&one, one_warp, 32, one_bytes));
  if (max_warps <= 1) return one;
  int ctas = 0;
  KVINFER_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, item_kernel, 32 * max_warps, max_warps * tile_bytes));
  return std::max(1, std::min(one, ctas * max_warps));
}

// A warp's state in its scratch: kStateRows rows of DVO floats (O normalised by its
// row sum and v_scale), then their base-2 LSEs.
constexpr int kStateRows = 16;
template <int DVO>
inline constexpr int kWarpStateBytes = kStateRows * (DVO + 1) * 4;

template <int DVO>
__device__ __forceinline__ float* warp_state_o(unsigned char* scratch, int row) {
  return reinterpret_cast<float*>(scratch) + row * DVO;
}
template <int DVO>
__device__ __forceinline__ float* warp_state_lse(unsigned char* scratch) {
  return reinterpret_cast<float*>(scratch) + kStateRows * DVO;
}

// The one-warp tile's state (o / row_max / row_sum as its mma accumulators hold them:
// the lane holds rows lane / 4 and lane / 4 + 8, dims 8 c + 2 (lane % 4) + {0, 1}) into
// its scratch.
template <int DVO, int kVoFrags>
__device__ __forceinline__ void stash_warp_state(const AttentionKernelParams& p, const float (&o)[1][kVoFrags][4],
                                                 const float (&row_max)[1][2], const float (&row_sum)[1][2], float sc,
                                                 int lane, unsigned char* scratch) {
  static_assert(kVoFrags * 8 == DVO, "one-warp tile: every dim in the accumulators");
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[0][h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = lane / 4 + 8 * h;
    const float norm = sum != 0.0f ? p.kv.v_scale / sum : 0.0f;
    float* so = warp_state_o<DVO>(scratch, row);
#pragma unroll
    for (int c = 0; c < kVoFrags; ++c) {
      *reinterpret_cast<float2*>(so + 8 * c + 2 * (lane % 4)) = make_float2(o[0][c][2 * h] * norm, o[0][c][2 * h + 1] * norm);
    }
    if (lane % 4 == 0) warp_state_lse<DVO>(scratch)[row] = sum != 0.0f ? row_max[0][h] * sc + __log2f(sum) : -INFINITY;
  }
}

// Once every warp of the CTA has stashed its state (the barrier is here): the CTA's
// threads merge the W states of rows [0, rows), four dims per thread at a time, into
// the output and LSE, or into the item's partial state where its request has several
// chunks. scratch(w): warp w's scratch; row_of(i): packed row i's (token in the
// request, qo head).
template <int DVO, class Scratch, class RowOf>
__device__ __forceinline__ void merge_item_warps(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                 const detail::RequestInfo& r, int rows, Scratch scratch,
                                                 RowOf row_of) {
  static_assert(DVO % 4 == 0);
  constexpr int kMaxWarps = kMaxItemWarps;
  constexpr int kQuads = DVO / 4;
  __syncthreads();
  const int warps = min(int(blockDim.x) / 32, kMaxWarps);
  const bool split = r.num_chunks > 1;
  for (int u = int(threadIdx.x); u < rows * kQuads; u += int(blockDim.x)) {
    const int i = u / kQuads, e = (u % kQuads) * 4;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kMaxWarps; ++w) {
      if (w < warps) m = fmax_nan(m, warp_state_lse<DVO>(scratch(w))[i]);
    }
    float d = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kMaxWarps; ++w) {
      if (w >= warps) continue;
      // A warp without keys (lse -inf) weighs nothing and its state is zeros.
      const float wt = m != -INFINITY ? exp2_approx(warp_state_lse<DVO>(scratch(w))[i] - m) : 0.0f;
      const float4 x = *reinterpret_cast<const float4*>(warp_state_o<DVO>(scratch(w), i) + e);
      d += wt;
      acc.x += wt * x.x;
      acc.y += wt * x.y;
      acc.z += wt * x.z;
      acc.w += wt * x.w;
    }
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    const float merged_lse = d != 0.0f ? m + __log2f(d) : -INFINITY;
    const auto [tk, head] = row_of(i);
    if (split) {
      const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + tk;
      *reinterpret_cast<float4*>(p.schedule.partial_o + (prow * p.heads.num_qo_heads + head) * DVO + e) =
          make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
      if (e == 0) p.schedule.partial_lse[prow * p.heads.num_qo_heads + head] = merged_lse;
    } else {
      const std::int64_t orow = r.qo_begin + tk;
      // 16-bit output: 4 elements per 8-byte store.
      *reinterpret_cast<uint2*>(output_row(p.out, orow, head) + e) =
          make_uint2(pack_output2(p.out, acc.x * inv, acc.y * inv), pack_output2(p.out, acc.z * inv, acc.w * inv));
      if (e == 0 && p.out.lse) p.out.lse[orow * p.out.lse_stride_n + head * p.out.lse_stride_h] = merged_lse;
    }
  }
}

}  // namespace kvinfer::cuda
