// SPDX-License-Identifier: Apache-2.0
// The epilogue of the wgmma families' 128-row tiles (two warpgroups of 64 rows,
// threads 0-255): a split chunk writes its partial state directly, a whole item stages
// O in its warpgroup's rows of the Q tile and writes whole 16-byte chunks.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/epilogue.cuh"
#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

// Epilogue of a whole (unsplit) item: each warpgroup normalises its 64 rows of O,
// stages them in 16-bit in its own rows of the Q tile (free: its last S = Q K^T has
// completed) with 16-byte chunks swizzled by row, and then writes them as whole
// 16-byte chunks, a row's head slice by consecutive threads (the accumulator layout
// would write 4 bytes per thread, 8 rows per instruction). LSE as in store_output.
template <int D, int kVoFrags>
__device__ __forceinline__ void store_output_staged(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                    const detail::RequestInfo& r, const float (&o)[1][kVoFrags][4],
                                                    const float (&row_max)[1][2], const float (&row_sum)[1][2], float sc,
                                                    int rows, unsigned char* q_tile, int warpgroup) {
  const int lane = int(threadIdx.x) % 32, warp_in_group = (int(threadIdx.x) / 32) % 4;
  unsigned char* stage = q_tile + warpgroup * 64 * D * 2;  // this warpgroup's 64 rows, D * 2 bytes each
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sum = quad_sum(row_sum[0][h]);
    const int row = warp_in_group * 16 + lane / 4 + 8 * h;  // within the warpgroup
    const int i = warpgroup * 64 + row;                      // within the tile
    const float norm = sum != 0.0f ? p.kv.v_scale / sum : 0.0f;
    // Fragment c holds columns [8c, 8c + 8): chunk c of the row, 4 bytes per thread.
#pragma unroll
    for (int c = 0; c < kVoFrags; ++c) {
      *reinterpret_cast<std::uint32_t*>(stage + swizzled_chunk<D>(row, c) * 16 + 4 * (lane % 4)) =
          pack_output2(p.out, o[0][c][2 * h] * norm, o[0][c][2 * h + 1] * norm);
    }
    if (lane % 4 == 0 && p.out.lse && i < rows) store_row_lse(p, item, r, i, row_max[0][h], sc, sum);
  }
  // The warpgroup's rows are staged (named barriers 1 and 2: one per warpgroup).
  if (warpgroup == 0) {
    asm volatile("bar.sync 1, 128;" ::: "memory");
  } else {
    asm volatile("bar.sync 2, 128;" ::: "memory");
  }
  write_staged_rows<D, 128, 64>(p, item, r, stage, warpgroup * 64, rows, int(threadIdx.x) % 128);
}

// The epilogue of an item: a split chunk writes its fp32 partial state from the
// accumulators (warp w: tile rows [16 w, 16 w + 16)); a whole item stages O in the Q
// tile (store_output_staged).
template <int D, int kVoFrags>
__device__ __forceinline__ void finish_hopper_item(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                   const detail::RequestInfo& r, const float (&o)[1][kVoFrags][4],
                                                   const float (&row_max)[1][2], const float (&row_sum)[1][2],
                                                   float sc, int rows, int num_tiles, unsigned char* q_tile) {
  if (r.num_chunks > 1) {
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
    store_output<D, 16>(p, item, r, o, row_max, row_sum, sc, rows, warp, lane);
  } else {
    // An item without keys never waited for its Q tile, whose rows (copied by any
    // thread) the epilogue reuses: the copies land and the barrier orders them first.
    if (num_tiles == 0) {
      ptx::cp_async_wait_all();
      __syncthreads();
    }
    store_output_staged<D>(p, item, r, o, row_max, row_sum, sc, rows, q_tile, int(threadIdx.x) / 128);
  }
}

}  // namespace kvinfer::cuda
