// SPDX-License-Identifier: Apache-2.0
// Merges the partial states of split requests (split-KV), one CTA per query row
// and head; the grid is sized by the plan's capacity and idle CTAs exit, so
// a captured launch stays valid across re-plans.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/math.cuh"
#include "cuda/attention/merge_partials.hpp"
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"

namespace kvinfer::cuda {
namespace {

constexpr int kWarps = 8;

// The maximum over the CTA's threads (every thread gets it).
__device__ __forceinline__ float block_max(float x, float* scratch) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  float m = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

// One CTA per (query row, head). A request split into hundreds of chunks (one long
// request next to short ones, or one request alone) must not merge them one after
// another: the threads take the chunks' LSE in turn for the maximum, then the warps
// take the chunks in turn with every lane 4 dims, several chunks' loads in flight.
template <class TO>
__global__ void __launch_bounds__(kWarps * 32)
    merge_partials_kernel(const __grid_constant__ AttentionKernelParams p, int head_dim) {
  const int token = int(blockIdx.x) / p.num_qo_heads, h = int(blockIdx.x) % p.num_qo_heads;
  if (token >= p.counts[1]) return;
  const detail::MergeToken mt = p.merge_tokens[token];
  const detail::RequestInfo r = p.requests[mt.request];
  const std::int64_t t = mt.row - r.qo_begin;
  const auto partial_row = [&](int c) { return r.partial_begin + std::int64_t(c) * r.qo_len + t; };
  const auto chunk_lse = [&](int c) { return p.partial_lse[partial_row(c) * p.num_qo_heads + h]; };
  __shared__ float sm_max[kWarps];
  float m = -INFINITY;
  for (int c = int(threadIdx.x); c < r.num_chunks; c += kWarps * 32) m = fmaxf(m, chunk_lse(c));
  m = block_max(m, sm_max);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __shared__ float sm_acc[kWarps][512];
  __shared__ float sm_d[kWarps];
  float d = 0.0f;
  for (int e0 = lane * 4; e0 < head_dim; e0 += 128) {
    float acc[4] = {};
    if (m != -INFINITY) {
#pragma unroll 4
      for (int c = warp; c < r.num_chunks; c += kWarps) {
        const std::int64_t prow = partial_row(c);
        const float w = exp2_approx(p.partial_lse[prow * p.num_qo_heads + h] - m);
        const float4 o = *reinterpret_cast<const float4*>(p.partial_o + (prow * p.num_qo_heads + h) * head_dim + e0);
        acc[0] += w * o.x;
        acc[1] += w * o.y;
        acc[2] += w * o.z;
        acc[3] += w * o.w;
        if (e0 == lane * 4) d += w;
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) sm_acc[warp][e0 + i] = acc[i];
  }
  if (lane == 0) sm_d[warp] = d;
  __syncthreads();
  float d_all = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) d_all += sm_d[w];
  for (int e = threadIdx.x; e < head_dim; e += kWarps * 32) {
    float acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) acc += sm_acc[w][e];
    static_cast<TO*>(p.o)[mt.row * p.o_stride_n + h * p.o_stride_h + e] = from_float<TO>(d_all > 0.0f ? acc / d_all : 0.0f);
  }
  if (threadIdx.x == 0 && p.lse) {
    p.lse[mt.row * p.lse_stride_n + h * p.lse_stride_h] = d_all > 0.0f ? m + __log2f(d_all) : -INFINITY;
  }
}

}  // namespace

void launch_merge_partials(const AttentionKernelParams& p, DType o_dtype, int head_dim, std::int64_t grid,
                           cudaStream_t stream) {
  if (grid <= 0) return;
  if (head_dim % 4 != 0 || head_dim > 512) {
    throw Error("attention", "head_dim_vo", std::to_string(head_dim), "the CUDA merge needs a multiple of 4 up to 512");
  }
  dispatch_float_dtype(o_dtype, "merge_partials", [&](auto t) {
    using TO = decltype(t);
    merge_partials_kernel<TO><<<unsigned(grid * p.num_qo_heads), kWarps * 32, 0, stream>>>(p, head_dim);
  });
  KVINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace kvinfer::cuda
