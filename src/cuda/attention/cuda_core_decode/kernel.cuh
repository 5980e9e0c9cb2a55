// SPDX-License-Identifier: Apache-2.0
// Decode attention on CUDA cores: one work item (request, KV head, the query rows
// of the head group, KV chunk) per CTA. Memory-bound: every lane streams 8
// elements of a key row per load, a key row is split over D/8 lanes, and each
// warp runs several independent key streams with an online base-2 softmax per
// query row; the streams and warps are merged at the end. Included by its
// instance.cuh. docs/kernels.md, "CUDA-core decode".
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/bad_item.cuh"
#include "cuda/attention/tile/key_access.cuh"
#include "cuda/attention/tile/math.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

inline constexpr int kDecodeWarps = 4;
inline constexpr int kDecodeThreads = kDecodeWarps * 32;

template <int D, int kRows>
struct DecodeShape {
  static constexpr int kVec = 8;              // elements per lane per key row
  static constexpr int kLanes = D / kVec;     // lanes per key row: 8, 16, 32
  static constexpr int kStreamsPerWarp = 32 / kLanes;
  static constexpr int kStreams = kDecodeWarps * kStreamsPerWarp;
  // Keys per stream in flight per step: more rows hold more accumulators, so fewer
  // keys keep the registers (and so the resident warps) in budget.
  static constexpr int kUnroll = kRows >= 4 ? 2 : 4;
  static_assert(kLanes >= 1 && kLanes <= 32 && 32 % kLanes == 0, "head_dim must be 64, 128 or 256");
};

// Rotate-half RoPE of the 8 elements a lane holds; the partner half of the head
// dim sits kLanes/2 lanes away.
template <int D>
__device__ __forceinline__ void rope_vec8(float* x, int lane_in_row, float pos, float rcp_scale, float rcp_theta) {
  constexpr int kLanes = D / 8;
  float partner[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) partner[i] = __shfl_xor_sync(0xffffffffu, x[i], kLanes / 2, kLanes);
  const bool low = lane_in_row < kLanes / 2;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d = (lane_in_row % (kLanes / 2)) * 8 + i;  // index in [0, D/2)
    const float freq = rcp_scale * __powf(rcp_theta, float(2 * d) / float(D));
    float s, c;
    __sincosf(pos * freq, &s, &c);
    x[i] = low ? x[i] * c - partner[i] * s : x[i] * c + partner[i] * s;
  }
}

// Resident CTAs per SM asked of the register allocator: the accumulators of 8 rows
// need the whole register file of 2 CTAs; fewer rows fit 4 or 5 (16-20 warps), which
// keeps enough loads in flight for a memory-bound kernel.
template <int kRows>
inline constexpr int kDecodeMinBlocks = kRows >= 8 ? 2 : (kRows >= 2 ? 4 : 5);

// Sums x[i] over the kLanes lanes of a key row for every row i, and leaves every
// sum in every lane. A butterfly that halves the rows at each step (a lane keeps
// the half its lane bit selects and sends the other) costs log2(kLanes) +
// kRows - 1 shuffles instead of kRows * log2(kLanes); kRows broadcasts follow.
template <int kRows, int kLanes>
__device__ __forceinline__ void reduce_rows(float (&x)[kRows], int lane) {
  static_assert(kRows <= kLanes, "one lane bit per halving step");
  int group = kRows;
#pragma unroll
  for (int off = kLanes / 2; off >= 1; off /= 2) {
    if (group > 1) {
      const bool upper = (lane & off) != 0;
      const int half = group / 2;
#pragma unroll
      for (int i = 0; i < kRows / 2; ++i) {
        if (i < half) {
          const float send = upper ? x[i] : x[i + half];
          const float keep = upper ? x[i + half] : x[i];
          x[i] = keep + __shfl_xor_sync(0xffffffffu, send, off, kLanes);
        }
      }
      group = half;
    } else {
      x[0] += __shfl_xor_sync(0xffffffffu, x[0], off, kLanes);
    }
  }
  // Row r now sits in the lanes whose halving bits spell r (most significant first).
  const float mine = x[0];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    int src = 0, bit = kLanes / 2;
#pragma unroll
    for (int g = kRows; g > 1; g /= 2, bit /= 2) {
      if (r & (g / 2)) src |= bit;
    }
    x[r] = __shfl_sync(0xffffffffu, mine, src, kLanes);
  }
}

// The base-2 logits s[i][u] of the lane's kUnroll keys j0 + u * kStreams against every
// row (keys past the item's end -inf): dot products reduced over the row's lanes, then
// scale, ALiBi and soft cap unless the scale was folded into q.
template <int D, int kRows, int kUnroll, int kStreams, class TKV>
__device__ __forceinline__ void decode_scores(float (&s)[kRows][kUnroll], const Vec8<TKV> (&kv_k)[kUnroll],
                                              const float (&q)[kRows][8], const int (&head)[kRows],
                                              const int (&token)[kRows], const AttentionKernelParams& p,
                                              const detail::WorkItem& item, const detail::RequestInfo& r, int j0,
                                              int lane_in_row, bool fold_scale) {
  constexpr int kVec = 8, kLanes = D / 8;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    float kf[kVec];
    kv_k[u].to_float(kf);
    const int j = j0 + u * kStreams;
    if (p.logits.rope)
      rope_vec8<D>(kf, lane_in_row, float(j), p.logits.rope_rcp_scale, p.logits.rope_rcp_theta);
    float dots[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      dots[i] = 0.0f;
#pragma unroll
      for (int e = 0; e < kVec; ++e) dots[i] = fmaf(q[i][e], kf[e], dots[i]);
    }
    reduce_rows<kRows, kLanes>(dots, lane_in_row);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float dot = dots[i];
      if (!fold_scale) {
        float x = dot * p.logits.sm_scale;
        if (p.logits.alibi_slopes)
          x += __ldg(p.logits.alibi_slopes + head[i]) * float(j - (r.kv_len - r.qo_len + token[i]));
        if (p.logits.soft_cap > 0.0f) x = p.logits.soft_cap * tanhf(x / p.logits.soft_cap);
        dot = x * kLog2e;
      }
      s[i][u] = j < item.kv_end ? dot : -INFINITY;
    }
  }
}

// One step of a stream's online softmax: the running maximum m, sum d and accumulator
// acc of every row take the step's scores s (turned into weights) and values kv_v.
template <int kRows, int kUnroll, class TKV>
__device__ __forceinline__ void decode_softmax_step(float (&m)[kRows], float (&d)[kRows], float (&acc)[kRows][8],
                                                    float (&s)[kRows][kUnroll], const Vec8<TKV> (&kv_v)[kUnroll]) {
  constexpr int kVec = 8;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    float block_max = s[i][0];
#pragma unroll
    for (int u = 1; u < kUnroll; ++u) block_max = fmaxf(block_max, s[i][u]);
    const float m_new = fmaxf(m[i], block_max);
    if (m_new == -INFINITY) continue;  // nothing seen by this stream yet
    const float rescale = exp2_approx(m[i] - m_new);
    d[i] *= rescale;
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[i][e] *= rescale;
    m[i] = m_new;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) s[i][u] = exp2_approx(s[i][u] - m_new);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    float vf[kVec];
    kv_v[u].to_float(vf);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (m[i] == -INFINITY) continue;
      d[i] += s[i][u];
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[i][e] = fmaf(s[i][u], vf[e], acc[i][e]);
    }
  }
}

// Merges the streams of a warp (lanes kLanes apart hold the same dims).
template <int kRows, int kLanes>
__device__ __forceinline__ void merge_streams(float (&m)[kRows], float (&d)[kRows], float (&acc)[kRows][8]) {
  constexpr int kVec = 8;
#pragma unroll
  for (int off = kLanes; off < 32; off *= 2) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const float m_o = __shfl_xor_sync(0xffffffffu, m[i], off);
      const float d_o = __shfl_xor_sync(0xffffffffu, d[i], off);
      const float m_new = fmaxf(m[i], m_o);
      const float a = m_new == -INFINITY ? 0.0f : exp2_approx(m[i] - m_new);
      const float b = m_new == -INFINITY ? 0.0f : exp2_approx(m_o - m_new);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float acc_o = __shfl_xor_sync(0xffffffffu, acc[i][e], off);
        acc[i][e] = acc[i][e] * a + acc_o * b;
      }
      d[i] = d[i] * a + d_o * b;
      m[i] = m_new;
    }
  }
}

// Merges the warps through shared memory (the ring's bytes, once every warp is done
// with them) and writes the item's rows: O and LSE, or the partial state of its chunk
// where the request is split. Every thread of the CTA finalises (row, 8 dims) slices.
template <int D, int kRows>
__device__ __forceinline__ void finish_decode_item(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                   const detail::RequestInfo& r, const float (&m)[kRows],
                                                   const float (&d)[kRows], const float (&acc)[kRows][8],
                                                   unsigned char* smem, float (&sm_md)[kDecodeWarps][kRows][2],
                                                   int rows, int warp, int lane) {
  constexpr int kVec = 8, kLanes = D / 8;
  // with them).
  ptx::cp_async_wait_all();
  __syncthreads();
  auto& sm_acc = *reinterpret_cast<float(*)[kDecodeWarps][kRows][D]>(smem);
  if (lane < kLanes) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) sm_acc[warp][i][lane * kVec + e] = acc[i][e];
      if (lane == 0) {
        sm_md[warp][i][0] = m[i];
        sm_md[warp][i][1] = d[i];
      }
    }
  }
  __syncthreads();
  // Every thread of the CTA finalises (row, 8 dims) slices.
  const bool split = r.num_chunks > 1;
  for (int slot = threadIdx.x; slot < rows * kLanes; slot += kDecodeThreads) {
    const int i = slot / kLanes, l = slot % kLanes;
    float m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) m_all = fmaxf(m_all, sm_md[w][i][0]);
    float out[kVec] = {}, d_all = 0.0f;
    if (m_all != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kDecodeWarps; ++w) {
        const float wgt = exp2_approx(sm_md[w][i][0] - m_all);
        d_all += sm_md[w][i][1] * wgt;
#pragma unroll
        for (int e = 0; e < kVec; ++e) out[e] += sm_acc[w][i][l * kVec + e] * wgt;
      }
    }
    const float norm = d_all != 0.0f ? p.kv.v_scale / d_all : 0.0f;
    const float lse = d_all != 0.0f ? m_all + __log2f(d_all) : -INFINITY;
    const int row = item.row_begin + i;
    const int tok = row / p.heads.group_size,
              h = item.kv_head * p.heads.group_size + row % p.heads.group_size;
    if (split) {
      const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + tok;
      float* po = p.schedule.partial_o + (prow * p.heads.num_qo_heads + h) * D + l * kVec;
#pragma unroll
      for (int e = 0; e < kVec; e += 4) {
        *reinterpret_cast<float4*>(po + e) = make_float4(out[e] * norm, out[e + 1] * norm, out[e + 2] * norm, out[e + 3] * norm);
      }
      if (l == 0) p.schedule.partial_lse[prow * p.heads.num_qo_heads + h] = lse;
    } else {
      const std::int64_t orow = r.qo_begin + tok;
      static_assert(kVec == 8, "one 16-byte chunk of the 16-bit output");
      *reinterpret_cast<uint4*>(output_row(p.out, orow, h) + l * kVec) = pack_output8(p.out, out, norm);
      if (l == 0 && p.out.lse) p.out.lse[orow * p.out.lse_stride_n + h * p.out.lse_stride_h] = lse;
    }
  }
}

template <class TQ, class TKV, int D, int kRows>
__global__ void __launch_bounds__(kDecodeThreads, kDecodeMinBlocks<kRows>) decode_kernel(const __grid_constant__ AttentionKernelParams p) {
  using S = DecodeShape<D, kRows>;
  constexpr int kVec = S::kVec, kLanes = S::kLanes, kStreams = S::kStreams, kUnroll = S::kUnroll;
  const detail::WorkItem item = load_work_item(p.schedule.items + blockIdx.x);
  if (unused_item(item)) return;  // grid sized for the capacity
  const detail::RequestInfo r = p.schedule.requests[item.request];
  wait_for_inputs();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int lane_in_row = lane % kLanes;
  const int rows = item.row_end - item.row_begin;
  const bool fold_scale = p.logits.alibi_slopes == nullptr && p.logits.soft_cap <= 0.0f;
  const bool page_missing = kDeviceIndexChecks && item_page_missing(p, item, kDecodeThreads);  // agreed on after q's loads

  // Query rows of the item: packed row -> (token, head).
  float q[kRows][kVec];
  int head[kRows], token[kRows];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int row = item.row_begin + (i < rows ? i : 0);
    token[i] = row / p.heads.group_size;
    head[i] = item.kv_head * p.heads.group_size + row % p.heads.group_size;
    const auto* src = static_cast<const TQ*>(p.q.data) + (r.qo_begin + token[i]) * p.q.stride_n +
                      head[i] * p.q.stride_h + lane_in_row * kVec;
    Vec8<TQ> v = load_vec8(src);
    v.to_float(q[i]);
    if (p.logits.rope) {
      rope_vec8<D>(q[i], lane_in_row, float(r.kv_len - r.qo_len + token[i]), p.logits.rope_rcp_scale,
                   p.logits.rope_rcp_theta);
    }
    if (fold_scale) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) q[i][e] *= p.logits.sm_scale_log2;
    }
  }

  const KeyLocator locate = item_locator(p, item);
  const ItemRows kv_rows = item_rows(p, item, sizeof(TKV), lane_in_row * kVec);  // the lane's vector of each row
  const KeyRow k_row = kv_rows.k, v_row = kv_rows.v;

  float m[kRows], d[kRows], acc[kRows][kVec];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    m[i] = -INFINITY;
    d[i] = 0.0f;
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[i][e] = 0.0f;
  }

  // K/V rows stream through a per-warp ring in shared memory (cp.async, no
  // registers held while in flight): stage i + kStages - 1 is requested before
  // stage i is used, so memory latency overlaps the arithmetic. Each lane copies and
  // later reads only its own bytes, so waiting on its own copies is enough.
  constexpr int kStages = kUnroll >= 4 ? 2 : 3;
  constexpr int kLoadBytes = int(sizeof(Vec8<TKV>));  // 16 (16-bit KV) or 8 (fp8)
  constexpr int kRingBytes = kDecodeWarps * kStages * kUnroll * 2 * 32 * 16;
  constexpr int kMergeBytes = kDecodeWarps * kRows * D * int(sizeof(float));
  __shared__ __align__(16) unsigned char smem[kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes];
  const auto ring = [&](int stage, int u, int kv) {
    return smem + ((((warp * kStages + stage) * kUnroll + u) * 2 + kv) * 32 + lane) * 16;
  };
  // A bad page id: no key (tile/bad_item.cuh).
  const bool bad_page = kDeviceIndexChecks && any_bad_page<false>(p, item, page_missing, smem);
  const int kv_end = bad_page ? item.kv_begin : item.kv_end;
  constexpr int kStep = kUnroll * kStreams;
  const int warp_first = item.kv_begin + warp * S::kStreamsPerWarp;
  const auto request = [&](int jw, int stage) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = jw + lane / kLanes + u * kStreams;
      if (jw < kv_end && j < kv_end) {
        const KeySlot at = locate(j);
        ptx::cp_async<kLoadBytes>(ring(stage, u, 0), k_row(at));
        ptx::cp_async<kLoadBytes>(ring(stage, u, 1), v_row(at));
      }
    }
    ptx::cp_async_commit();
  };
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) request(warp_first + st * kStep, st);

  // The loop bound is uniform across a warp (its streams differ only in the lane's
  // offset) so that every lane reaches the shuffles of every iteration.
  int stage = 0;
  for (int jw = warp_first; jw < kv_end; jw += kStep) {
    request(jw + (kStages - 1) * kStep, (stage + kStages - 1) % kStages);
    ptx::cp_async_wait_group<kStages - 1>();
    const int j0 = jw + lane / kLanes;
    Vec8<TKV> kv_k[kUnroll], kv_v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (j0 + u * kStreams < kv_end) {
        kv_k[u].raw = *reinterpret_cast<const decltype(kv_k[u].raw)*>(ring(stage, u, 0));
        kv_v[u].raw = *reinterpret_cast<const decltype(kv_v[u].raw)*>(ring(stage, u, 1));
      } else {
        zero(kv_k[u]);
        zero(kv_v[u]);
      }
    }
    stage = (stage + 1) % kStages;
    float s[kRows][kUnroll];
    decode_scores<D, kRows, kUnroll, kStreams>(s, kv_k, q, head, token, p, item, r, j0, lane_in_row, fold_scale);
    decode_softmax_step(m, d, acc, s, kv_v);
  }
  merge_streams<kRows, kLanes>(m, d, acc);
  __shared__ float sm_md[kDecodeWarps][kRows][2];  // the warps' row maxima and sums
  finish_decode_item<D, kRows>(p, item, r, m, d, acc, smem, sm_md, rows, warp, lane);
  if (bad_page) mark_bad_chunk<false>(p, item, r, rows);
}

}  // namespace kvinfer::cuda
