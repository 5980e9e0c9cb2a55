// SPDX-License-Identifier: Apache-2.0
// The warp-specialised Hopper (sm_90a) prefill: a producer streams the item's K and V
// tiles into a ring of shared-memory stages (ragged KV: one warp's TMA bulk tensor
// copies; a paged cache: the producer warpgroup's row gathers, ws_prefill/gather.cuh),
// each stage guarded by a "full" barrier (the copy's bytes landed) and an "empty" one
// (both consumer warpgroups are done with it); two consumer warpgroups, 64 query rows
// each, run S = Q K^T and O += P V on wgmma and the online softmax, and never wait on
// a copy they issued or on each other. setmaxnreg moves the producer's registers to
// the consumers. The softmax, mask policy and epilogues are those of the wgmma
// mainloop (tile/warpgroup_tile.cuh, tile/warpgroup_epilogue.cuh), so both families
// give the same result for the same item. docs/kernels.md, "Warp-specialised
// prefill". Included by its instance.cuh.
//
// Per key tile t, in each consumer warpgroup (as in the wgmma mainloop, the
// exponentials of one tile run under the tensor cores' work on the previous):
//   wait K_{t+1} full and V_t full
//   issue S_{t+1} = Q K_{t+1}^T, then O += P_t V_t
//   wait for S_{t+1}; release K_{t+1}; mask and softmax it while O += P_t V_t runs
//   wait for O; release V_t; rescale O; P_{t+1} from S_{t+1}
// The producer copies K_0, then K_{t+1} and V_t for each t, each into its stage once
// both consumers released the stage's previous tile.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/bad_item.cuh"
#include "cuda/attention/tile/item_keys.cuh"
#include "cuda/attention/tile/kv_copy.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/attention/tile/warpgroup_epilogue.cuh"
#include "cuda/attention/tile/warpgroup_tile.cuh"
#include "cuda/attention/ws_prefill/gather.cuh"
#include "cuda/attention/ws_prefill/shape.cuh"
#include "cuda/check.cuh"
#include "cuda/common/mbarrier.cuh"
#include "cuda/common/named_barrier.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/common/tma.cuh"
#include "cuda/common/wgmma.cuh"

namespace kvinfer::cuda {

// The attention parameters and, for ragged KV, the tensor maps of K and V: NHD or HND
// tensors seen as (D, tokens, heads), innermost first, in boxes of 64 columns x kKeys
// tokens of one head.
struct WsPrefillParams {
  AttentionKernelParams attn;
  CUtensorMap k_map, v_map;
};

// The ring of K and V stages and its barriers in shared memory.
template <int D>
struct WsRing {
  using S = WsPrefillShape<D>;
  unsigned char* base;
  __device__ __forceinline__ std::uint64_t* barrier(int i) const {
    return reinterpret_cast<std::uint64_t*>(base + S::barriers) + i;
  }
  __device__ __forceinline__ std::uint64_t* full_k(int t) const { return barrier(t % S::kStages); }
  __device__ __forceinline__ std::uint64_t* full_v(int t) const { return barrier(S::kStages + t % S::kStages); }
  __device__ __forceinline__ std::uint64_t* empty_k(int t) const { return barrier(2 * S::kStages + t % S::kStages); }
  __device__ __forceinline__ std::uint64_t* empty_v(int t) const { return barrier(3 * S::kStages + t % S::kStages); }
  __device__ __forceinline__ std::uint64_t* tail() const { return barrier(4 * S::kStages); }
  __device__ __forceinline__ unsigned char* k_tile(int t) const { return base + S::k + (t % S::kStages) * S::k_stage; }
  __device__ __forceinline__ unsigned char* v_tile(int t) const { return base + S::v + (t % S::kStages) * S::v_stage; }
  // The parity of tile t's use of its stage (the ring's pass).
  __device__ __forceinline__ static unsigned pass(int t) { return unsigned(t / S::kStages) & 1u; }

  // One thread: full barriers take the TMA producer's one arrival (and the copies'
  // bytes) or each gathering thread's (`full_arrivals`), empty ones an arrival of each
  // consumer warpgroup, the tail one the producer's.
  __device__ __forceinline__ void init(unsigned full_arrivals) const {
    for (int s = 0; s < S::kStages; ++s) {
      mbarrier::init(barrier(s), full_arrivals);
      mbarrier::init(barrier(S::kStages + s), full_arrivals);
      mbarrier::init(barrier(2 * S::kStages + s), 2);
      mbarrier::init(barrier(3 * S::kStages + s), 2);
    }
    mbarrier::init(tail(), 1);
    mbarrier::fence_init();
  }
};

// The key tiles the TMA producer copies: tile t holds the keys [key_begin + t kKeys,
// + kKeys) of the request (key_end its last), head `head`, the tensor's rows from
// token0 + t kKeys.
struct WsKeyTiles {
  int key_begin, key_end, num_tiles, head;
  int token0;  // the tensor row of key_begin
};

// One key tile t of ragged K or V into its stage, one box per 64-column panel, lane 0
// issuing; its bytes complete on `full`.
template <int D>
__device__ __forceinline__ void copy_key_tile(const CUtensorMap* map, unsigned char* tile, std::uint64_t* full,
                                              const WsKeyTiles& kt, int t, int lane) {
  using S = WsPrefillShape<D>;
  if (lane == 0) {
    mbarrier::arrive_expect_tx(full, S::k_stage);
#pragma unroll
    for (int c = 0; c < S::kPanels; ++c) {
      tma::load_3d(tile + c * S::kKeys * 128, map, full, 64 * c, kt.token0 + t * S::kKeys, kt.head);
    }
  }
}

// The TMA producer warp (ragged KV): K_0, then K_{t+1} and V_t for each tile t. Rows
// past the item's keys land too (other requests' rows, zeros past the tensor, or what
// a stage held before): the mask gives their scores zero probability, and the rows of
// the last V tile past the keys are zeroed here before its consumers may read it (0
// times a NaN or infinity there would otherwise reach O).
template <int D>
__device__ __forceinline__ void produce_kv(const WsPrefillParams& wp, const WsRing<D>& ring, const WsKeyTiles& kt,
                                           int lane) {
  using S = WsPrefillShape<D>;
  const int num_tiles = kt.num_tiles;
  const int valid_in_last = kt.key_end - (kt.key_begin + (num_tiles - 1) * S::kKeys);
  const bool partial_last = valid_in_last < S::kKeys;
  if (lane == 0) {
    tma::prefetch_map(&wp.k_map);
    tma::prefetch_map(&wp.v_map);
  }
  if (num_tiles > 0) copy_key_tile<D>(&wp.k_map, ring.k_tile(0), ring.full_k(0), kt, 0, lane);
  for (int t = 0; t < num_tiles; ++t) {
    if (t + 1 < num_tiles) {
      mbarrier::wait(ring.empty_k(t + 1), ring.pass(t + 1) ^ 1u);
      copy_key_tile<D>(&wp.k_map, ring.k_tile(t + 1), ring.full_k(t + 1), kt, t + 1, lane);
    }
    mbarrier::wait(ring.empty_v(t), ring.pass(t) ^ 1u);
    const bool tail = t == num_tiles - 1 && partial_last;
    copy_key_tile<D>(&wp.v_map, ring.v_tile(t), tail ? ring.tail() : ring.full_v(t), kt, t, lane);
  }
  if (num_tiles == 0 || !partial_last) return;
  __syncwarp();
  const int t = num_tiles - 1;
  mbarrier::wait(ring.tail(), 0);
  unsigned char* tile = ring.v_tile(t);
  constexpr int kChunksPerRow = 8;  // 16-byte chunks of a panel's 128-byte row
  const int chunks = (S::kKeys - valid_in_last) * kChunksPerRow * S::kPanels;
  for (int i = lane; i < chunks; i += 32) {
    const int panel = i / ((S::kKeys - valid_in_last) * kChunksPerRow);
    const int rest = i % ((S::kKeys - valid_in_last) * kChunksPerRow);
    const int row = valid_in_last + rest / kChunksPerRow;
    *reinterpret_cast<uint4*>(tile + panel * S::kKeys * 128 + row * 128 + (rest % kChunksPerRow) * 16) =
        make_uint4(0, 0, 0, 0);
  }
  wgmma::fence_proxy_async_shared();  // the zeros, before wgmma reads the tile
  __syncwarp();
  if (lane == 0) mbarrier::arrive(ring.full_v(t));
}

// What each key tile of a consumer warpgroup works with.
template <class T, int D>
struct WsConsumer {
  using S = WsPrefillShape<D>;
  const AttentionKernelParams& p;
  const ItemKeys& keys;
  const WsRing<D>& ring;
  const HopperMma<T, S>& mma;
  const HopperSoftmax<T, S>& softmax;
  const HopperTileState<S>& st;
  int lane;
  bool leader;  // thread 0 of the warpgroup: releases stages for it
  __device__ __forceinline__ void release(std::uint64_t* empty) const {
    if (leader) mbarrier::arrive(empty);
  }
};

// The first key tile's scores and P (O is zero: nothing to rescale).
template <class T, int D>
__device__ __forceinline__ void ws_first_key_tile(const WsConsumer<T, D>& m) {
  mbarrier::wait(m.ring.full_k(0), 0);
  wgmma::fence();
  m.mma.issue_qk(0, m.st.s[0]);
  wgmma::wait<0>();
  fence_operands(m.st.s[0]);
  m.release(m.ring.empty_k(0));
  m.softmax.scores(m.p, m.keys, m.st, 0, m.lane);
  m.softmax.to_p(m.st);
}

// One key tile t: O += P_t V_t beside S_{t+1} = Q K_{t+1}^T and its softmax (kNext:
// tile t + 1 exists; compile-time, so that the wgmma groups in flight are known at
// every wait).
template <bool kNext, class T, int D>
__device__ __forceinline__ void ws_key_tile(const WsConsumer<T, D>& m, int t) {
  const HopperTileState<WsPrefillShape<D>>& st = m.st;
  if constexpr (kNext) mbarrier::wait(m.ring.full_k(t + 1), m.ring.pass(t + 1));
  mbarrier::wait(m.ring.full_v(t), m.ring.pass(t));
  fence_operands(st.o[0]);
  wgmma::fence();
  if constexpr (kNext) m.mma.issue_qk(t + 1, st.s[0]);
  m.mma.issue_pv(t, st.o[0], st.pa);
  if constexpr (kNext) {
    wgmma::wait<1>();  // S_{t+1}; O += P_t V_t may still run
    fence_operands(st.s[0]);
    m.release(m.ring.empty_k(t + 1));
    const bool changed = m.softmax.scores(m.p, m.keys, st, t + 1, m.lane);
    // Wait for O += P V only after the exponentials (the row sums), so that they
    // overlap it.
    wgmma::schedule_after(st.row_sum[0][0] + st.row_sum[0][1]);
    wgmma::wait<0>();
    fence_operands(st.o[0]);
    fence_operands(st.pa);
    m.release(m.ring.empty_v(t));
    if (changed) rescale_rows(st.o, st.rescale);
    m.softmax.to_p(st);
  } else {
    wgmma::wait<0>();
    fence_operands(st.o[0]);
    m.release(m.ring.empty_v(t));
  }
}

template <class T, int D>
__global__ void __launch_bounds__(WsPrefillShape<D>::kThreads, 1)
    ws_prefill_kernel(const __grid_constant__ WsPrefillParams wp) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = WsPrefillShape<D>;
  const AttentionKernelParams& p = wp.attn;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const HopperSmem smem = align_hopper_smem(smem_raw);
  const WsRing<D> ring{smem.ptr};
  detail::WorkItem item;
  if (!fetch_heaviest_item(p, item)) return;
  const detail::RequestInfo r = p.schedule.requests[item.request];
  if (threadIdx.x == 0) ring.init(p.kv.paged() ? WsGather<D>::kThreads : 1u);
  __syncthreads();  // the barriers are initialised before any thread uses them
  wait_for_inputs();
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, warpgroup = int(threadIdx.x) / 128;
  const ItemKeys keys = item_keys(p, item, r, nullptr);
  // A bad page id: no key tile (tile/bad_item.cuh), agreed by the whole CTA before the
  // producer and the consumers part (the vote's scratch is the gathers' table, not yet
  // in use).
  const bool bad_page = kDeviceIndexChecks && p.kv.paged() &&
                        any_bad_page<false>(p, item, item_page_missing(p, item, S::kThreads), smem.ptr + S::row_offsets);
  const int num_tiles = bad_page ? 0 : keys.num_tiles(S::kKeys);

  if (warpgroup == 2) {  // the producer
    tma::shrink_registers<S::kProducerRegs>();
    if (p.kv.paged()) {
      gather_kv<D>(p, item, ring, smem.ptr, keys.key_begin, keys.key_end, num_tiles,
                   int(threadIdx.x) - S::kConsumerThreads);
    } else if (warp == 8) {
      const WsKeyTiles kt{keys.key_begin, keys.key_end, num_tiles, item.kv_head, r.kv_begin + keys.key_begin};
      produce_kv<D>(wp, ring, kt, lane);
    }
    return;
  }
  tma::grow_registers<S::kConsumerRegs>();

  // Q by the consumers' copies (packed GQA rows are not one box), then the state.
  const int rows = item.row_end - item.row_begin;
  const int group = p.heads.group_size;
  load_tile16<S::kConsumerThreads, S::kTileRows, D, SwizzledPanels>(
      smem.ptr + S::q, [&](int i) { return packed_q_row(p, item, r, group, i); }, rows);
  ptx::cp_async_wait_all();
  wgmma::fence_proxy_async_shared();
  named_barrier::sync<S::kQBarrier, S::kConsumerThreads>();  // Q landed for both warpgroups

  const HopperSoftmax<T, S> softmax(p, item, rows, lane, warp);
  const HopperMma<T, S> mma(smem.addr, warpgroup);
  float o[1][S::kVoFrags][4], s[1][S::kKeyFrags][4];
  std::uint32_t pa[S::kPvSteps][4];
  float row_max[1][2] = {{-INFINITY, -INFINITY}}, row_sum[1][2] = {{0.0f, 0.0f}};
#pragma unroll
  for (int c = 0; c < S::kVoFrags; ++c) o[0][c][0] = o[0][c][1] = o[0][c][2] = o[0][c][3] = 0.0f;
  float rescale[1][2];
  const HopperTileState<S> st{o, s, pa, row_max, row_sum, rescale};

  const WsConsumer<T, D> consumer{p, keys, ring, mma, softmax, st, lane, threadIdx.x % 128 == 0};
  if (num_tiles > 0) ws_first_key_tile(consumer);
  for (int t = 0; t + 1 < num_tiles; ++t) ws_key_tile<true>(consumer, t);
  if (num_tiles > 0) ws_key_tile<false>(consumer, num_tiles - 1);
  if (r.num_chunks > 1) {
    store_output<D, 16>(p, item, r, o, row_max, row_sum, softmax.sc, rows, warp, lane);
  } else {
    // A warpgroup stages its O in 64 rows' worth of the Q tile's bytes, which at head_dim
    // 128 and 256 (Q in panels of 128 rows) hold the other warpgroup's Q rows too: both
    // warpgroups' last S = Q K^T are done before either stages. (The wgmma mainloop's
    // last tile starts with a CTA barrier that gives it the same order.)
    named_barrier::sync<S::kQBarrier, S::kConsumerThreads>();
    store_output_staged<D>(p, item, r, o, row_max, row_sum, softmax.sc, rows, smem.ptr + S::q, warpgroup);
  }
  if (bad_page && r.num_chunks > 1) {  // the producer has left: the consumers' barrier
    named_barrier::sync<S::kQBarrier, S::kConsumerThreads>();
    write_bad_chunk_lse(p, item, r, rows, int(threadIdx.x), S::kConsumerThreads);
  }
#endif
}

template <class T, int D>
struct WsPrefillKernel {
  static constexpr int kThreads = WsPrefillShape<D>::kThreads;
  static constexpr int kSmem = WsPrefillShape<D>::kSmem;
  static constexpr auto kernel = ws_prefill_kernel<T, D>;
  static void prepare() {
    KVINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  }
};

}  // namespace kvinfer::cuda
