// SPDX-License-Identifier: Apache-2.0
// The MLA epilogue: O / sum (times the value scale) and the LSE of each of the O
// role's rows, written as the output or, for a split request, as this chunk's partial
// state in the layout the attention merge kernel reads. Included by mla_kernel.cuh.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/common/device_status.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/mla/mla_kernel_params.cuh"
#include "cuda/mla/mla_keys.cuh"

namespace kvinfer::cuda {

// O / sum and the LSE of a thread's rows rb * 16 + g (+ 8) of the item, whose sums
// row_sum are the rows' whole sums (over every lane and warp that holds a part of them).
// Its columns: col0 + 8 n + 2 t (+ 1) for the S::kOFrags fragments n of acc, or with
// kFp8Piece = W > 0 the order of the fp8 P V (mla_fp8.cuh): for each piece p of W
// fragments, the 2W contiguous columns from col0 + 8 W p + 2 W t, acc[W p + i][2h]
// then acc[W p + i][2h + 1].
template <class S, int kFp8Piece = 0>
__device__ __forceinline__ void mla_store_rows(const MlaKernelParams& p, const detail::WorkItem& item,
                                               const detail::RequestInfo& r, int rows,
                                               const float (&acc)[S::kOFrags][4], const float (&row_max)[2],
                                               const float (&row_sum)[2], int rb, int col0, int lane) {
  const int g = lane / 4, t = lane % 4;
  const bool split = r.num_chunks > 1;
  const std::int64_t heads = p.num_heads.divisor;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = rb * 16 + g + 8 * h;
    if (row >= rows) continue;
    std::uint32_t head = 0;
    const std::int64_t token = p.num_heads.divmod(std::uint32_t(item.row_begin + row), &head);
    const bool empty = row_sum[h] == 0.0f;  // no key; a NaN sum (a NaN logit) makes the row NaN
    const float inv = empty ? 0.0f : p.v_scale / row_sum[h];
    const float lse = empty ? -INFINITY : row_max[h] + __log2f(row_sum[h]);
    if (split) {
      const std::int64_t state =
          (r.partial_begin + std::int64_t(item.chunk) * r.qo_len + token) * heads + head;
      if constexpr (kFp8Piece > 0) {
        constexpr int W = kFp8Piece;
#pragma unroll
        for (int piece = 0; piece < S::kOFrags / W; ++piece) {
          float* po = p.schedule.partial_o + state * S::kDc + col0 + 8 * W * piece + 2 * W * t;
#pragma unroll
          for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int i = 0; i < W; i += 4) {
              const int c = W * piece + i, e = 2 * h + x;
              *reinterpret_cast<float4*>(po + W * x + i) =
                  make_float4(acc[c][e] * inv, acc[c + 1][e] * inv, acc[c + 2][e] * inv, acc[c + 3][e] * inv);
            }
        }
      } else {
        float* po = p.schedule.partial_o + state * S::kDc + col0 + 2 * t;
#pragma unroll
        for (int n = 0; n < S::kOFrags; ++n) {
          *reinterpret_cast<float2*>(po + 8 * n) = make_float2(acc[n][2 * h] * inv, acc[n][2 * h + 1] * inv);
        }
      }
      if (col0 == 0 && t == 0) p.schedule.partial_lse[state] = lse;
      continue;
    }
    const std::int64_t n_out = r.qo_begin + token;
    if constexpr (kFp8Piece > 0) {
      constexpr int W = kFp8Piece;
#pragma unroll
      for (int piece = 0; piece < S::kOFrags / W; ++piece) {
        std::uint16_t* po = output_row(p.out, n_out, head) + col0 + 8 * W * piece + 2 * W * t;
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
          for (int i = 0; i < W; i += 8) {
            const int c = W * piece + i, e = 2 * h + x;
            uint4 v;
            v.x = pack_output2(p.out, acc[c][e] * inv, acc[c + 1][e] * inv);
            v.y = pack_output2(p.out, acc[c + 2][e] * inv, acc[c + 3][e] * inv);
            v.z = pack_output2(p.out, acc[c + 4][e] * inv, acc[c + 5][e] * inv);
            v.w = pack_output2(p.out, acc[c + 6][e] * inv, acc[c + 7][e] * inv);
            ptx::st_v4(po + W * x + i, v);
          }
      }
    } else {
      auto* po = reinterpret_cast<std::uint32_t*>(output_row(p.out, n_out, head) + col0 + 2 * t);
#pragma unroll
      for (int n = 0; n < S::kOFrags; ++n)
        po[4 * n] = pack_output2(p.out, acc[n][2 * h] * inv, acc[n][2 * h + 1] * inv);
    }
    if (p.out.lse != nullptr && col0 == 0 && t == 0) {
      p.out.lse[n_out * p.out.lse_stride_n + head * p.out.lse_stride_h] = lse * p.lse_scale;
    }
  }
}

// The rows of the warp's O role (row block rb, columns from c0 * 8), each lane's
// rows g and g + 8 in the column order kFp8Piece says (mla_store_rows); row_sum is
// summed over the row's four lanes here, in place.
template <class S, int kFp8Piece = 0>
__device__ __forceinline__ void mla_epilogue(const MlaKernelParams& p, const detail::WorkItem& item,
                                             const detail::RequestInfo& r, int rows,
                                             const float (&acc)[S::kOFrags][4], const float (&row_max)[2],
                                             float (&row_sum)[2], int warp, int lane) {
  const int rb = warp / S::kColSplit, c0 = (warp % S::kColSplit) * (S::kCols / 8);  // the O role
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
  mla_store_rows<S, kFp8Piece>(p, item, r, rows, acc, row_max, row_sum, rb, c0 * 8, lane);
}

// The end of an item whose lookups used a page id outside the cache (checked_page;
// every thread calls this): the first bad entry of its pages goes to the status, and
// its rows become zeros with LSE -inf, or, in a split, its partial LSE the value the
// merge turns into such a row (kBadChunkLse). The barrier orders these writes after the
// epilogue's.
template <class S>
__device__ __forceinline__ void mla_discard_bad_item(const MlaKernelParams& p, const detail::WorkItem& item,
                                                     const detail::RequestInfo& r, const MlaKeys& keys, int rows) {
  if (!__syncthreads_or(bad_page_seen(keys.seen, p.pages.num_pages))) return;
  if (threadIdx.x == 0) {
    const std::int64_t first = item.kv_base + p.pages.page_size.div(std::uint32_t(keys.key_begin));
    const std::int64_t last = item.kv_base + p.pages.page_size.div(std::uint32_t(keys.key_end - 1)) + 1;
    record_bad_pages(p.schedule.status, p.pages.page_ids, first, last, p.pages.num_pages, item.request);
  }
  const std::int64_t heads = p.num_heads.divisor;
  constexpr int kChunks = S::kDc / 8;  // 16-byte chunks of a 16-bit output row
  for (int i = int(threadIdx.x); i < rows * kChunks; i += int(blockDim.x)) {
    std::uint32_t head = 0;
    const std::int64_t token = p.num_heads.divmod(std::uint32_t(item.row_begin + i / kChunks), &head);
    if (r.num_chunks > 1) {
      if (i % kChunks == 0) {
        p.schedule
            .partial_lse[(r.partial_begin + std::int64_t(item.chunk) * r.qo_len + token) * heads + head] =
            kBadChunkLse;
      }
      continue;
    }
    const std::int64_t n = r.qo_begin + token;
    ptx::st_v4(static_cast<char*>(p.out.o) + (n * p.out.o_stride_n + head * p.out.o_stride_h) * 2 +
                   (i % kChunks) * 16,
               make_uint4(0, 0, 0, 0));
    if (p.out.lse != nullptr && i % kChunks == 0)
      p.out.lse[n * p.out.lse_stride_n + head * p.out.lse_stride_h] = -INFINITY;
  }
}

}  // namespace kvinfer::cuda
