// SPDX-License-Identifier: Apache-2.0
// Merges the partial states of split requests (split-KV), one warp or one CTA per
// query row and head; the grid is sized by the plan's capacity and idle CTAs exit, so
// a captured launch stays valid across re-plans.
//
// The merge of a plan with a fixed split size must not depend on the rest of the
// batch (batch invariance), whose longest request sets the kernel and the warps of
// the launch. Its chunks are summed in one order: classes of chunks modulo kClasses,
// S_k = the fused multiply-adds w_c o_c over c = k, k + kClasses, ... in order from
// +0, then o = (((+0 + S_0) + S_1) + ... + S_15) / d (m and d as in
// merge_partials_kernel). The warp per row sums so for every plan (with at most
// kClasses chunks each class is one w_c o_c), merge_partials_fixed_order_kernel for
// fixed-split plans of more chunks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "cuda/attention/tile/math.cuh"
#include "cuda/attention/merge_partials.hpp"
#include "cuda/common/convert.cuh"
#include "cuda/common/device_status.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {
namespace {

constexpr int kMaxWarps = 16;
constexpr int kMaxHeadDim = 512;

constexpr int kClasses = 16;
static_assert(kClasses % kMaxWarps == 0);

// The maximum (NaN if any lane's is) and the sum over a warp's lanes (every lane gets
// them).
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) x = fmax_nan(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// The fixed order's sums (merge_partials_fixed_order_kernel), rounded as written:
// the compiler must neither contract nor reorder them.
__device__ __forceinline__ void add_weighted(float4& acc, float w, const float4& o) {
  acc.x = __fmaf_rn(w, o.x, acc.x);
  acc.y = __fmaf_rn(w, o.y, acc.y);
  acc.z = __fmaf_rn(w, o.z, acc.z);
  acc.w = __fmaf_rn(w, o.w, acc.w);
}
__device__ __forceinline__ void add_class(float (&sum)[4], const float4& s) {
  sum[0] = __fadd_rn(sum[0], s.x);
  sum[1] = __fadd_rn(sum[1], s.y);
  sum[2] = __fadd_rn(sum[2], s.z);
  sum[3] = __fadd_rn(sum[3], s.w);
}

// Stores the merged dims [e0, e0 + 4) of (row, head), x * inv each.
template <class TO>
__device__ __forceinline__ void store_merged(const MergeParams& p, std::int64_t row, int h, int e0,
                                             const float (&x)[4], float inv) {
  TO out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = from_float<TO>(x[i] * inv);
  using Chunk = std::conditional_t<sizeof(TO) == 4, uint4, uint2>;  // 4 elements (rows are 16-byte aligned)
  *reinterpret_cast<Chunk*>(static_cast<TO*>(p.out.o) + row * p.out.o_stride_n + h * p.out.o_stride_h + e0) =
      *reinterpret_cast<const Chunk*>(out);
}

// The query row and head a merge slot (a CTA or a warp) takes: its plan entries, read
// before the wait (the plan's arrays are in place before the attention kernel starts;
// with a programmatic launch the slot may start while that kernel still writes the
// states), and where its chunks' states are.
struct MergeRow {
  std::int64_t row;  // in ragged q/o
  int h;
  detail::RequestInfo r;
  std::int64_t t;  // token in the request

  __device__ __forceinline__ std::int64_t state(const MergeParams& p, int c) const {
    return (r.partial_begin + std::int64_t(c) * r.qo_len + t) * p.num_qo_heads + h;
  }
};

// False for a slot past this plan's rows (the grid is sized by the plan's capacity);
// else waits for the attention kernel.
__device__ __forceinline__ bool begin_merge_row(const MergeParams& p, int slot, MergeRow& m) {
  const int token = slot / p.num_qo_heads;
  if (token >= p.schedule.counts[1]) return false;
  const detail::MergeToken mt = p.schedule.merge_tokens[token];
  m.r = p.schedule.requests[mt.request];
  m.row = mt.row;
  m.h = slot % p.num_qo_heads;
  m.t = mt.row - m.r.qo_begin;
  wait_for_previous_kernel();
  allow_next_kernel();
  return true;
}

// One CTA per (query row, head): o = sum_c w_c o_c / sum_c w_c with
// w_c = 2^(lse_c - max_c lse_c); zeros and -inf LSE where every chunk is empty
// (SPEC: no NaN). Every warp takes the chunks' LSE maximum and weight sum itself
// (no barrier before the loads), then the warps take the chunks in turn, 4 dims
// per lane and four chunks' loads in flight, and one barrier sums the warps. The
// chain of dependent memory accesses per CTA is short, so the many small CTAs of a
// batch run as about one wave; the launch gives a CTA more warps when a request
// has many chunks (one long request next to short ones, or alone), whose rows are
// then few, so that its chunks' loads still spread over many warps.
template <class TO>
__global__ void __launch_bounds__(kMaxWarps * 32)
    merge_partials_kernel(const __grid_constant__ MergeParams p, int head_dim) {
  MergeRow mr;
  if (!begin_merge_row(p, int(blockIdx.x), mr)) return;
  const detail::RequestInfo& r = mr.r;
  const std::int64_t row = mr.row;
  const int h = mr.h;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, warps = int(blockDim.x) / 32;
  const auto state = [&](int c) { return mr.state(p, c); };

  // This warp's first kPrefetch chunks (their LSE and this lane's first 4 dims of O)
  // are loaded before the reductions over every chunk's LSE, so that the two round
  // trips to L2 overlap rather than follow each other.
  constexpr int kPrefetch = 4;
  const int e_first = lane * 4;
  float pre_lse[kPrefetch];
  float4 pre_o[kPrefetch];
#pragma unroll
  for (int k = 0; k < kPrefetch; ++k) {
    const int c = warp + k * warps;
    const bool ok = c < r.num_chunks && e_first < head_dim;
    pre_lse[k] = ok ? p.schedule.partial_lse[state(c)] : -INFINITY;
    pre_o[k] = ok ? *reinterpret_cast<const float4*>(p.schedule.partial_o + state(c) * head_dim + e_first)
                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }

  float m = -INFINITY;
#pragma unroll 4
  for (int c = lane; c < r.num_chunks; c += 32) m = fmax_nan(m, p.schedule.partial_lse[state(c)]);
  m = warp_max(m);
  if (m == kBadChunkLse) m = -INFINITY;  // a chunk met a bad page id: the row is zeros, LSE -inf
  float d = 0.0f;
  if (m != -INFINITY) {
#pragma unroll 4
    for (int c = lane; c < r.num_chunks; c += 32) d += exp2_approx(p.schedule.partial_lse[state(c)] - m);
  }
  d = warp_sum(d);

  extern __shared__ float4 sm_acc[];  // [warps][head_dim / 4]
  const int row4 = head_dim / 4;
  for (int e0 = lane * 4; e0 < head_dim; e0 += 128) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (m != -INFINITY) {
      int c0 = warp;
      if (e0 == e_first) {  // the prefetched chunks (zero weight past the last chunk)
#pragma unroll
        for (int k = 0; k < kPrefetch; ++k) {
          const float w = exp2_approx(pre_lse[k] - m);
          acc.x += w * pre_o[k].x;
          acc.y += w * pre_o[k].y;
          acc.z += w * pre_o[k].z;
          acc.w += w * pre_o[k].w;
        }
        c0 = warp + kPrefetch * warps;
      }
#pragma unroll 4
      for (int c = c0; c < r.num_chunks; c += warps) {
        const float w = exp2_approx(p.schedule.partial_lse[state(c)] - m);
        const float4 o = *reinterpret_cast<const float4*>(p.schedule.partial_o + state(c) * head_dim + e0);
        acc.x += w * o.x;
        acc.y += w * o.y;
        acc.z += w * o.z;
        acc.w += w * o.w;
      }
    }
    sm_acc[warp * row4 + e0 / 4] = acc;
  }
  __syncthreads();
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  for (int e0 = int(threadIdx.x) * 4; e0 < head_dim; e0 += warps * 128) {
    float sum[4] = {};
    for (int i = 0; i < warps; ++i) {
      const float4 a = sm_acc[i * row4 + e0 / 4];
      sum[0] += a.x;
      sum[1] += a.y;
      sum[2] += a.z;
      sum[3] += a.w;
    }
    store_merged<TO>(p, row, h, e0, sum, inv);
  }
  if (threadIdx.x == 0 && p.out.lse) {
    p.out.lse[row * p.out.lse_stride_n + h * p.out.lse_stride_h] =
        d != 0.0f ? (m + __log2f(d)) * p.lse_scale : -INFINITY;
  }
}

// A warp per (query row, head), kRowWarps rows per CTA: the kernel for a few chunks
// per request over many rows (a batch whose requests split in 2 to 4), where a CTA
// per row would leave most of its warps without a chunk and wait at its barrier. Lane
// l takes chunk c0 + l's LSE and weight, which the chunk loop shuffles; each lane
// sums 4 dims, the first kPrefetch chunks' loaded before the LSE reductions.
constexpr int kRowWarps = 4;

template <class TO>
__global__ void __launch_bounds__(kRowWarps * 32)
    merge_partials_warp_kernel(const __grid_constant__ MergeParams p, int head_dim) {
  const int lane = int(threadIdx.x) % 32;
  MergeRow mr;
  if (!begin_merge_row(p, int(blockIdx.x) * kRowWarps + int(threadIdx.x) / 32, mr)) return;
  const std::int64_t row = mr.row;
  const int h = mr.h;
  const int n = mr.r.num_chunks;
  const auto state = [&](int c) { return mr.state(p, c); };

  constexpr int kPrefetch = 4;
  const int e_first = lane * 4;
  float4 pre[kPrefetch];
#pragma unroll
  for (int k = 0; k < kPrefetch; ++k) {
    pre[k] = k < n && e_first < head_dim
                 ? *reinterpret_cast<const float4*>(p.schedule.partial_o + state(k) * head_dim + e_first)
                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float m = -INFINITY;
  for (int c = lane; c < n; c += 32) m = fmax_nan(m, p.schedule.partial_lse[state(c)]);
  m = warp_max(m);
  if (m == kBadChunkLse) m = -INFINITY;  // a chunk met a bad page id: the row is zeros, LSE -inf
  // This lane's weight of chunk c0 + lane (0 past the last chunk or for an empty one).
  const auto weight = [&](int c0) {
    return m != -INFINITY && c0 + lane < n ? exp2_approx(p.schedule.partial_lse[state(c0 + lane)] - m) : 0.0f;
  };
  float d = 0.0f;
  for (int c0 = 0; c0 < n; c0 += 32) d += weight(c0);
  d = warp_sum(d);
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;

  // The loops are uniform across the warp (every lane reaches the shuffles); lanes past
  // head_dim load and store nothing. The sum takes the fixed order (the top of this file).
  const auto load = [&](int c, int e0) {
    return *reinterpret_cast<const float4*>(p.schedule.partial_o + state(c) * head_dim + e0);
  };
  const auto add_product = [](float (&sum)[4], float w, const float4& o) {  // a class of one chunk
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    add_weighted(s, w, o);
    add_class(sum, s);
  };
  for (int base = 0; base < head_dim; base += 128) {
    const int e0 = base + e_first;
    const bool mine = e0 < head_dim;
    float sum[4] = {};
    if (n <= kClasses) {
      const float w_lane = weight(0);
      int c = 0;
      if (base == 0) {
#pragma unroll
        for (int k = 0; k < kPrefetch; ++k) {
          const float w = __shfl_sync(0xffffffffu, w_lane, k);
          if (k < n) add_product(sum, w, pre[k]);
        }
        c = kPrefetch;
      }
#pragma unroll 4
      for (; c < n; ++c) {
        const float w = __shfl_sync(0xffffffffu, w_lane, c);
        if (mine) add_product(sum, w, load(c, e0));
      }
    } else {  // a launch captured for a few chunks per request, re-planned to more
      float4 classes[kClasses];
      for (int k = 0; k < kClasses; ++k) classes[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int c0 = 0; c0 < n; c0 += 32) {
        const float w_lane = weight(c0);
        for (int c = c0; c < min(n, c0 + 32); ++c) {
          const float w = __shfl_sync(0xffffffffu, w_lane, c - c0);
          if (mine) add_weighted(classes[c % kClasses], w, load(c, e0));
        }
      }
      for (int k = 0; k < kClasses; ++k) add_class(sum, classes[k]);
    }
    if (mine) store_merged<TO>(p, row, h, e0, sum, inv);
  }
  if (lane == 0 && p.out.lse)
    p.out.lse[row * p.out.lse_stride_n + h * p.out.lse_stride_h] =
        d != 0.0f ? (m + __log2f(d)) * p.lse_scale : -INFINITY;
}

// A CTA per (query row, head), as merge_partials_kernel, warp w summing the classes
// w, w + warps, ...; one barrier, and the classes are added in order.
template <class TO>
__global__ void __launch_bounds__(kMaxWarps * 32)
    merge_partials_fixed_order_kernel(const __grid_constant__ MergeParams p, int head_dim) {
  MergeRow mr;
  if (!begin_merge_row(p, int(blockIdx.x), mr)) return;
  const std::int64_t row = mr.row;
  const int h = mr.h;
  const int n = mr.r.num_chunks;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, warps = int(blockDim.x) / 32;
  const int classes = kClasses / warps;  // this warp's: warp + j * warps
  const auto state = [&](int c) { return mr.state(p, c); };
  const auto weight = [&](float lse, float m) { return m != -INFINITY ? exp2_approx(lse - m) : 0.0f; };

  // This warp's first kPrefetch chunks, its classes in turn (slot s: class s % classes,
  // the class's chunk s / classes), loaded before the reductions over every LSE.
  constexpr int kPrefetch = 4;
  static_assert(kPrefetch % (kClasses / 4) == 0, "whole rounds of the classes of 4 warps");
  const auto slot_chunk = [&](int s) { return warp + (s % classes) * warps + kClasses * (s / classes); };
  const int e_first = lane * 4;
  float pre_lse[kPrefetch];
  float4 pre_o[kPrefetch];
#pragma unroll
  for (int s = 0; s < kPrefetch; ++s) {
    const int c = slot_chunk(s);
    const bool ok = c < n && e_first < head_dim;
    pre_lse[s] = ok ? p.schedule.partial_lse[state(c)] : -INFINITY;
    pre_o[s] = ok ? *reinterpret_cast<const float4*>(p.schedule.partial_o + state(c) * head_dim + e_first)
                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float m = -INFINITY;
#pragma unroll 4
  for (int c = lane; c < n; c += 32) m = fmax_nan(m, p.schedule.partial_lse[state(c)]);
  m = warp_max(m);
  if (m == kBadChunkLse) m = -INFINITY;  // a chunk met a bad page id: the row is zeros, LSE -inf
  float d = 0.0f;
#pragma unroll 4
  for (int c = lane; c < n; c += 32) d += weight(p.schedule.partial_lse[state(c)], m);
  d = warp_sum(d);

  extern __shared__ float4 sm_classes[];  // [kClasses][head_dim / 4]
  const int row4 = head_dim / 4;
  for (int e0 = e_first; e0 < head_dim; e0 += 128) {
    for (int j = 0; j < classes; ++j) {
      const int k = warp + j * warps;
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      int c = k;
      if (e0 == e_first) {  // the class's prefetched chunks, in order
#pragma unroll
        for (int s = 0; s < kPrefetch; ++s) {
          if (s % classes == j && slot_chunk(s) < n) add_weighted(acc, weight(pre_lse[s], m), pre_o[s]);
        }
        c += kClasses * (kPrefetch / classes);
      }
#pragma unroll 2
      for (; c < n; c += kClasses) {
        add_weighted(acc, weight(p.schedule.partial_lse[state(c)], m),
                     *reinterpret_cast<const float4*>(p.schedule.partial_o + state(c) * head_dim + e0));
      }
      sm_classes[k * row4 + e0 / 4] = acc;
    }
  }
  __syncthreads();
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  for (int e0 = int(threadIdx.x) * 4; e0 < head_dim; e0 += warps * 128) {
    float sum[4] = {};
#pragma unroll
    for (int k = 0; k < kClasses; ++k) add_class(sum, sm_classes[k * row4 + e0 / 4]);
    store_merged<TO>(p, row, h, e0, sum, inv);
  }
  if (threadIdx.x == 0 && p.out.lse) {
    p.out.lse[row * p.out.lse_stride_n + h * p.out.lse_stride_h] =
        d != 0.0f ? (m + __log2f(d)) * p.lse_scale : -INFINITY;
  }
}

}  // namespace

void launch_merge_partials(const MergeParams& p, DType o_dtype, int head_dim, std::int64_t grid,
                           int max_chunks, bool fixed_order, bool programmatic, cudaStream_t stream) {
  if (grid <= 0) return;
  if (head_dim % 4 != 0 || head_dim > kMaxHeadDim) {
    throw Error("attention", "head_dim_vo", std::to_string(head_dim), "the CUDA merge needs a multiple of 4 up to 512");
  }
  dispatch_float_dtype(o_dtype, "merge_partials", [&](auto t) {
    using TO = decltype(t);
    // Programmatic dependent launch (sm_90 on): the merge is launched while the
    // attention kernel runs and its CTAs wait at griddepcontrol.wait, which hides the
    // launch gap between the two (microseconds, next to a decode of tens).
    // Up to 4 chunks a warp per row, else a CTA per row with about four chunks per
    // warp, 4 to 16 warps: on the H200 the warp per row took 0.95-0.99 of the CTA's
    // time with 2 or 4 chunks (batch decodes split in two, 64 x 4k: 0.985) but 1.01-1.04
    // with 8 or 16, where a warp's chunks follow each other (16 x 8k: 1.007, 16 x 8k
    // in 512-key chunks: 1.041). A fixed-split plan of more chunks takes the fixed
    // order's CTA kernel (its results then depend on no other request's chunks). A
    // captured launch keeps the kernel and warps of its plan; each merges any number
    // of chunks correctly.
    const std::int64_t rows = grid * p.num_qo_heads;
    const int warps = max_chunks <= 16 ? 4 : max_chunks <= 32 ? 8 : kMaxWarps;  // of a CTA per row
    if (max_chunks <= 4) {
      launch_after_previous(merge_partials_warp_kernel<TO>, dim3(unsigned((rows + kRowWarps - 1) / kRowWarps)),
                            dim3(kRowWarps * 32), 0, stream, programmatic, p, head_dim);
    } else if (fixed_order) {
      launch_after_previous(merge_partials_fixed_order_kernel<TO>, dim3(unsigned(rows)), dim3(unsigned(warps * 32)),
                            std::size_t(kClasses) * std::size_t(head_dim) * sizeof(float), stream, programmatic, p,
                            head_dim);
    } else {
      launch_after_previous(merge_partials_kernel<TO>, dim3(unsigned(rows)), dim3(unsigned(warps * 32)),
                            std::size_t(warps) * std::size_t(head_dim) * sizeof(float), stream, programmatic, p,
                            head_dim);
    }
  });
  KVINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace kvinfer::cuda
