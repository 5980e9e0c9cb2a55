// SPDX-License-Identifier: Apache-2.0
// The epilogues of the mma.sync families: O normalised and written directly, or
// staged through shared memory as whole 16-byte chunks, or as the partial state and
// LSE of a split chunk.
#pragma once

#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>
#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

// The base-2 LSE of packed row i of an unsplit item (the rows' maximum scaled by sc).
__device__ __forceinline__ void store_row_lse(const AttentionKernelParams& p, const detail::WorkItem& item,
                                              const detail::RequestInfo& r, int i, float row_max, float sc, float sum) {
  const auto [tk, head] = packed_row(p, item, p.heads.group_size, i);
  const std::int64_t orow = r.qo_begin + tk;
  p.out.lse[orow * p.out.lse_stride_n + head * p.out.lse_stride_h] =
      sum != 0.0f ? row_max * sc + __log2f(sum) : -INFINITY;
}

// Writes kRows staged rows of O (16-bit, D elements, swizzled 16-byte chunks) starting
// at tile row first_row as whole 16-byte chunks, a row's head slice by consecutive
// threads; t is the thread's index among the kThreads that write. kPadded: only the
// problem's head_dim_vo columns (p.dims.vo) of the D staged.
template <int D, int kThreads, int kRows, bool kPadded = false>
__device__ __forceinline__ void write_staged_rows(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                  const detail::RequestInfo& r, const unsigned char* stage,
                                                  int first_row, int rows, int t) {
  constexpr int kChunks = D / 8, kRowsPerPass = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0, "whole rows per pass");
  const int chunk = t % kChunks;
  if (kPadded && chunk >= p.dims.vo / 8) return;
#pragma unroll
  for (int row = t / kChunks; row < kRows; row += kRowsPerPass) {
    const int i = first_row + row;
    if (i >= rows) break;  // rows are in order: the rest are past the item's end too
    const auto [tk, head] = packed_row(p, item, p.heads.group_size, i);
    const std::int64_t orow = r.qo_begin + tk;
    const uint4 v = *reinterpret_cast<const uint4*>(stage + swizzled_chunk<D>(row, chunk) * 16);
    ptx::st_v4(output_row(p.out, orow, head) + chunk * 8, v);
  }
}

// The columns of O a warp's accumulators hold: from col0 on (all of head_dim_vo, or a
// column slice of a wide head), and whether it writes the rows' LSE
// (one of the slices that hold the same softmax state).
struct OutputSlice {
  int col0 = 0;
  bool lse = true;
};

// Epilogue: normalises and writes this thread's rows of O (or the partial state of
// a split chunk) and LSE. Warp w owns tile rows [w * kRowsPerWarp, +kRowsPerWarp).
// kPadded: only the problem's head_dim_vo columns, partial states of that width.
template <int DVO, int kRowsPerWarp, bool kPadded = false, int kMmaM, int kVoFrags>
__device__ __forceinline__ void store_output(const AttentionKernelParams& p, const detail::WorkItem& item,
                                             const detail::RequestInfo& r, const float (&o)[kMmaM][kVoFrags][4],
                                             const float (&row_max)[kMmaM][2], const float (&row_sum)[kMmaM][2],
                                             float sc, int rows, int warp, int lane,
                                             OutputSlice slice = {}) {
  const bool split = r.num_chunks > 1;
  const int col = slice.col0 + 2 * (lane % 4);
  const int width = kPadded ? p.dims.vo : DVO;  // of O's rows and of the partial states'
  const auto skipped = [&](int c) { return kPadded && slice.col0 + 8 * c >= width; };
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(row_sum[m][h]);
      const int i = warp * kRowsPerWarp + m * 16 + lane / 4 + 8 * h;
      if (i >= rows) continue;
      const auto [tk, head] = packed_row(p, item, p.heads.group_size, i);
      const float norm = sum != 0.0f ? p.kv.v_scale / sum : 0.0f;
      const float lse = sum != 0.0f ? row_max[m][h] * sc + __log2f(sum) : -INFINITY;
      if (split) {
        const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + tk;
        float* po = p.schedule.partial_o + (prow * p.heads.num_qo_heads + head) * width + col;
#pragma unroll
        for (int c = 0; c < kVoFrags; ++c) {
          if (skipped(c)) continue;
          *reinterpret_cast<float2*>(po + 8 * c) = make_float2(o[m][c][2 * h] * norm, o[m][c][2 * h + 1] * norm);
        }
        if (lane % 4 == 0 && slice.lse) p.schedule.partial_lse[prow * p.heads.num_qo_heads + head] = lse;
      } else {
        const std::int64_t orow = r.qo_begin + tk;
        std::uint16_t* out = output_row(p.out, orow, head) + col;
#pragma unroll
        for (int c = 0; c < kVoFrags; ++c) {
          if (skipped(c)) continue;
          *reinterpret_cast<std::uint32_t*>(out + 8 * c) =
              pack_output2(p.out, o[m][c][2 * h] * norm, o[m][c][2 * h + 1] * norm);
        }
        if (lane % 4 == 0 && slice.lse && p.out.lse)
          p.out.lse[orow * p.out.lse_stride_n + head * p.out.lse_stride_h] = lse;
      }
    }
  }
}

// Normalises a warp's rows of O and stages them in 16-bit in `stage` (rows of D
// 16-bit elements, 16-byte chunks swizzled by row; the slice's columns), writing
// their LSE as store_output does.
template <int D, int kRowsPerWarp, int kMmaM, int kVoFrags>
__device__ __forceinline__ void stage_output_rows(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                  const detail::RequestInfo& r, const float (&o)[kMmaM][kVoFrags][4],
                                                  const float (&row_max)[kMmaM][2], const float (&row_sum)[kMmaM][2],
                                                  float sc, int rows, unsigned char* stage, int warp, int lane,
                                                  OutputSlice slice = {}) {
  static_assert(kRowsPerWarp == 16 * kMmaM);
  const int chunk0 = slice.col0 / 8;
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(row_sum[m][h]);
      const int row = m * 16 + lane / 4 + 8 * h;  // within the warp's rows
      const int i = warp * kRowsPerWarp + row;    // within the tile
      const float norm = sum != 0.0f ? p.kv.v_scale / sum : 0.0f;
#pragma unroll
      for (int c = 0; c < kVoFrags; ++c) {
        *reinterpret_cast<std::uint32_t*>(stage + swizzled_chunk<D>(row, chunk0 + c) * 16 + 4 * (lane % 4)) =
            pack_output2(p.out, o[m][c][2 * h] * norm, o[m][c][2 * h + 1] * norm);
      }
      if (lane % 4 == 0 && slice.lse && p.out.lse && i < rows) store_row_lse(p, item, r, i, row_max[m][h], sc, sum);
    }
  }
}

// Epilogue of a whole (unsplit) item through shared memory: each warp normalises
// its rows of O, stages them in its own rows of the Q tile (free once its last
// S = Q K^T is done) and writes them back as whole 16-byte chunks, a row's head slice
// by consecutive lanes (the accumulator layout writes 4 bytes per lane, 8 rows per
// store). `stage` is the warp's first row of the Q tile.
template <int D, int kRowsPerWarp, bool kPadded = false, int kMmaM, int kVoFrags>
__device__ __forceinline__ void store_output_warp_staged(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                         const detail::RequestInfo& r,
                                                         const float (&o)[kMmaM][kVoFrags][4],
                                                         const float (&row_max)[kMmaM][2],
                                                         const float (&row_sum)[kMmaM][2], float sc, int rows,
                                                         unsigned char* stage, int warp, int lane) {
  static_assert(kVoFrags == D / 8);
  stage_output_rows<D, kRowsPerWarp>(p, item, r, o, row_max, row_sum, sc, rows, stage, warp, lane);
  __syncwarp();
  write_staged_rows<D, 32, kRowsPerWarp, kPadded>(p, item, r, stage, warp * kRowsPerWarp, rows, lane);
}

}  // namespace kvinfer::cuda
