// SPDX-License-Identifier: Apache-2.0
// Merges the partial states of split requests (split-KV) in chunk order, one CTA
// per query row; the grid is sized by the plan's capacity and idle CTAs exit, so
// a captured launch stays valid across re-plans.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/math.cuh"
#include "cuda/attention/merge_partials.hpp"
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"

namespace kvinfer::cuda {
namespace {

constexpr int kThreads = 128;

template <class TO>
__global__ void __launch_bounds__(kThreads)
    merge_partials_kernel(const __grid_constant__ AttentionKernelParams p, int head_dim) {
  if (int(blockIdx.x) >= p.counts[1]) return;
  const detail::MergeToken mt = p.merge_tokens[blockIdx.x];
  const detail::RequestInfo r = p.requests[mt.request];
  const std::int64_t t = mt.row - r.qo_begin;
  for (int h = threadIdx.y; h < p.num_qo_heads; h += blockDim.y) {
    float m = -INFINITY;
    for (int c = 0; c < r.num_chunks; ++c) {
      const std::int64_t prow = r.partial_begin + std::int64_t(c) * r.qo_len + t;
      m = fmaxf(m, p.partial_lse[prow * p.num_qo_heads + h]);
    }
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
      float acc = 0.0f, d = 0.0f;
      if (m != -INFINITY) {
        for (int c = 0; c < r.num_chunks; ++c) {
          const std::int64_t prow = r.partial_begin + std::int64_t(c) * r.qo_len + t;
          const float w = exp2_approx(p.partial_lse[prow * p.num_qo_heads + h] - m);
          d += w;
          acc += w * p.partial_o[(prow * p.num_qo_heads + h) * head_dim + e];
        }
      }
      static_cast<TO*>(p.o)[mt.row * p.o_stride_n + h * p.o_stride_h + e] = from_float<TO>(d > 0.0f ? acc / d : 0.0f);
      if (e == 0 && p.lse) p.lse[mt.row * p.lse_stride_n + h * p.lse_stride_h] = d > 0.0f ? m + __log2f(d) : -INFINITY;
    }
  }
}

}  // namespace

void launch_merge_partials(const AttentionKernelParams& p, DType o_dtype, int head_dim, std::int64_t grid,
                           cudaStream_t stream) {
  if (grid <= 0) return;
  // Threads over (dims, heads): 32 dims x 4 heads.
  const dim3 block(32, kThreads / 32);
  dispatch_float_dtype(o_dtype, "merge_partials", [&](auto t) {
    using TO = decltype(t);
    merge_partials_kernel<TO><<<unsigned(grid), block, 0, stream>>>(p, head_dim);
  });
  KVINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace kvinfer::cuda
