// SPDX-License-Identifier: Apache-2.0
// MLA attention on tensor cores (mma.sync m16n8k16, ldmatrix, cp.async; sm_80 and
// later). One work item per CTA of 8 warps: a tile of 16, 32 or 64 packed query rows
// (tokens x heads of one request) against a chunk of the request's latent keys, in
// key tiles of 32. Every head reads the same latent rows, so a key tile is one
// [32, 576] block in shared memory (ckv's 512 columns, then kpe's 64) that serves as
// K for the logits and, by its first 512 columns, as V.
//
// The output is 512 wide, too wide for one warp's accumulators, so the warps split
// the work twice per tile:
//  - logits S = Q K^T: each warp takes (row block, 8 keys) units over all 576 dims,
//    or half the dims of one unit when the units are fewer than the warps; the
//    partial S go through shared memory (the nope and pe terms in separate
//    accumulators, each with its own scale);
//  - O += P V: each warp owns a row block and a slice of the 512 columns (64, 128 or
//    256), reads the block's S, and runs the online softmax itself. The warps of one
//    row block compute the same row maxima and sums from the same S, so no
//    reduction across warps is needed at the end.
// fp8 KV stays as it landed and each warp converts (exactly) the bytes it reads to
// fp16 in registers, in which the mma then runs (mla_fp8.cuh; the q tile is put in
// that read's order, as fp16, once per item); fp16 and bf16 mixed run the mma in
// bf16, the fp16 side converted in place (mla_half_to_bf16). The next tiles stream in
// (cp.async, a ring of stages) while one is computed. Items of 16 rows (decode with 16
// heads) are bound by the chain of each tile (copy issue, S, two barriers, softmax,
// P V: ~470 instructions per warp at ~8 cycles each), 64 rows by shared-memory reads
// (ldmatrix of Q, K and V every tile: L1 at 79%); docs/kernels.md, "MLA".
//
// The kernel body composes its steps, each in a header of this folder: the shape and
// shared memory (mla_shape.cuh), the item's keys (mla_keys.cuh), the copies and the
// ring of stages (mla_stages.cuh), S and its exchange (mla_scores.cuh), the softmax
// and P V (mla_softmax_pv.cuh), the epilogue (mla_epilogue.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/mask_policy.hpp"
#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/math.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/mla/mla_epilogue.cuh"
#include "cuda/mla/mla_fp8.cuh"
#include "cuda/mla/mla_kernel_params.cuh"
#include "cuda/mla/mla_keys.cuh"
#include "cuda/mla/mla_scores.cuh"
#include "cuda/mla/mla_shape.cuh"
#include "cuda/mla/mla_softmax_pv.cuh"
#include "cuda/mla/mla_stages.cuh"

namespace kvinfer::cuda {

template <class TQ, class TKV, int kRowBlocks, bool kKpe>
__global__ void __launch_bounds__(MlaShape<kRowBlocks, kKpe>::kThreads,
                                  MlaSmem<TKV, kRowBlocks, kKpe>::kCtasPerSm)
    mla_kernel(const __grid_constant__ MlaKernelParams p) {
  using S = MlaShape<kRowBlocks, kKpe>;
  using L = MlaSmem<TKV, kRowBlocks, kKpe>;
  using T = MlaMmaType<TQ, TKV>;
  extern __shared__ __align__(128) unsigned char smem[];

  // The work item, the thread's indices and the keys the item's rows see.
  const detail::WorkItem item = load_work_item(p.schedule.items + blockIdx.x);
  if (unused_item(item)) return;
  const detail::RequestInfo r = p.schedule.requests[item.request];
  wait_for_inputs();
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;  // the lane's accumulator rows g, g + 8 and column pair t
  const int rows = item.row_end - item.row_begin;
  const MlaKeys keys = mla_keys<S>(p, item, r);

  // The q tile and the first key tiles in flight; the logits' scales undo q_scale.
  float* const s_buf = reinterpret_cast<float*>(smem + L::s);
  const float q_scale = mla_start<T, TQ, TKV, L>(p, item, r, rows, keys, smem);
  const float nope_scale = p.nope_scale / q_scale, pe_scale = p.pe_scale / q_scale;

  // The warp's two roles in each tile: the S role's units, and the O role's row block
  // rb and columns [c0 * 8, c0 * 8 + kCols), with the state of its rows.
  const MlaScoreWarp<S> s_role(smem + L::q, warp, lane);
  const int rb = warp / S::kColSplit, c0 = (warp % S::kColSplit) * (S::kCols / 8);
  const MlaFp8Lane<S> fp8_lane(g, t, c0 * 8);  // (fp8 KV only)
  int lim[2];
  mla_row_key_ends<S>(lim, p, item, keys, rb, g);
  float row_max[2], row_sum[2], acc[S::kOFrags][4];
  mla_zero_state(row_max, row_sum, acc);

  // The main loop: the tile's copies, S = Q K^T through the exchange, the softmax of
  // the O role's rows, O += P V. The tile's arrays are declared here, not in the steps
  // that fill them: NVVM promotes a kernel's arrays to registers in the order they are
  // declared, within a bound, so an array moved into a step (or one more or fewer)
  // changes how acc's registers are numbered, and ptxas then schedules differently.
  MlaKeyRow next_row = mla_first_key_row<L>(p, keys);
  for (int tile = 0; tile < keys.num_tiles; ++tile) {
    const int key0 = keys.key_begin + tile * S::kKeys;
    const unsigned char* kv = mla_next_tile<T, TKV, L>(p, keys, smem, tile, next_row);
    float sacc[S::kUnitsPerWarp][2][4] = {}, v[4];
    if constexpr (L::kFp8) {
      mla_fp8_scores<TKV>(s_role, fp8_lane, kv, sacc, v, s_buf, nope_scale, pe_scale, g, t);
    } else {
      mla_scores<T>(s_role, kv, sacc, v, s_buf, nope_scale, pe_scale, g, t);
    }
    __syncthreads();
    float s[2][8], base[2], w[8];
    std::uint32_t a[2][4];
    mla_read_scores<S>(s, s_buf, rb, g, t);
    if (keys.needs_mask(key0, S::kKeys)) mla_mask_scores(s, lim, key0, t);
    mla_softmax<T>(s, base, w, a, row_max, row_sum, acc);
    if constexpr (L::kFp8) {
      mla_fp8_pv<TKV, S>(acc, a, kv, fp8_lane);
    } else {
      mla_pv<T, S>(acc, a, kv, c0, lane);
    }
  }
  ptx::cp_async_wait_all();  // an item without keys still has its q tile in flight
  mla_epilogue<S, L::kFp8 ? MlaFp8Lane<S>::kPiece : 0>(p, item, r, rows, acc, row_max, row_sum, warp, lane);
  mla_discard_bad_item<S>(p, item, r, keys, rows);
}

// One compiled kernel: its shared memory, set once as the kernel's limit (beyond the
// default 48 KiB).
template <class TQ, class TKV, int kRowBlocks, bool kKpe>
struct MlaKernel {
  static constexpr int kSmem = MlaSmem<TKV, kRowBlocks, kKpe>::bytes;
  static constexpr auto kernel = mla_kernel<TQ, TKV, kRowBlocks, kKpe>;
  static void prepare() {
    static const bool prepared = [] {
      KVINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      return true;
    }();
    (void)prepared;
  }
};

// Calls f(MlaKernel<...>{}) for the row blocks (items of 16, 32 or 64 rows) and the
// rotary part chosen at run time.
template <class TQ, class TKV, class F>
void with_mla_kernel(int row_blocks, bool kpe, F&& f) {
  const auto pick = [&]<int kRowBlocks>() {
    if (kpe) {
      f(MlaKernel<TQ, TKV, kRowBlocks, true>{});
    } else {
      f(MlaKernel<TQ, TKV, kRowBlocks, false>{});
    }
  };
  switch (row_blocks) {
    case 1:
      return pick.template operator()<1>();
    case 2:
      return pick.template operator()<2>();
    default:
      return pick.template operator()<4>();
  }
}

template <class TQ, class TKV>
void launch_mla(const MlaKernelParams& p, int row_blocks, bool kpe, std::int64_t grid, cudaStream_t stream) {
  with_mla_kernel<TQ, TKV>(row_blocks, kpe, [&](auto k) {
    using K = decltype(k);
    K::prepare();
    launch_after_previous(K::kernel, dim3(unsigned(grid)), dim3(256), std::size_t(K::kSmem), stream, false,
                          p);
  });
}

template <class TQ, class TKV>
int mla_occupancy(int row_blocks, bool kpe) {
  int blocks = 0;
  with_mla_kernel<TQ, TKV>(row_blocks, kpe, [&](auto k) {
    using K = decltype(k);
    K::prepare();
    KVINFER_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, K::kernel, 256, std::size_t(K::kSmem)));
  });
  return blocks;
}

}  // namespace kvinfer::cuda
