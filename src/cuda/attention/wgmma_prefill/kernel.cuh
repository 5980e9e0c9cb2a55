// SPDX-License-Identifier: Apache-2.0
// The Hopper (sm_90a) mainloop of prefill: the same work items, mask policy, online
// softmax and epilogue as tensor_core_tile/, with S = Q K^T and O += P V on
// warpgroup tensor cores (wgmma.mma_async) instead of warp-level mma.sync. A CTA is
// two warpgroups, each owning 64 of the tile's 128 packed query rows. Q, K and V sit
// in shared memory in wgmma's 128-byte swizzle (64-element panels); S = Q K^T reads
// both operands from shared memory, O += P V takes P from registers (the S
// accumulators rounded to 16 bits, the A-fragment layout) and V transposed
// (MN-major) from shared memory.
//
// Software pipeline, per key tile t, with S stages of K and of V (the copies of K run
// one tile ahead of V's):
//   wait for V_t and K_{t+1}; barrier (all warps are done with tile t - 1)
//   issue S_{t+1} = Q K_{t+1}^T, then O += P_t V_t
//   copy K_{t+S} and V_{t+S-1} (cp.async) into the stages tiles t and t - 1 released
//   wait for S_{t+1} only; mask and softmax it while O += P_t V_t runs
//   wait for O; rescale O; P_{t+1} from S_{t+1}
// so the exponentials of one tile overlap the tensor cores' work on the previous,
// and each copy has S - 1 iterations to land.
// Runs 16-bit KV of the query's type with head_dim_qk == head_dim_vo in {64, 128,
// 256}, no RoPE and none of the general logits; everything else takes the portable
// kernel (attention_selector.cpp decides). Included by its instance.cuh.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/bad_item.cuh"
#include "cuda/attention/tile/item_keys.cuh"
#include "cuda/attention/tile/kv_copy.cuh"
#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/attention/tile/warpgroup_epilogue.cuh"
#include "cuda/attention/tile/warpgroup_tile.cuh"
#include "cuda/attention/wgmma_prefill/stages.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

// What each key tile of the mainloop works with: the params, the item's keys, its
// K/V stages, the warpgroup's mma, the softmax and the state of this thread's rows.
template <class T, int D, bool kPaged>
struct HopperMainloop {
  const AttentionKernelParams& p;
  const ItemKeys& keys;
  HopperKvStages<D, kPaged>& stages;
  const HopperMma<T, HopperPrefillShape<D>>& mma;
  const HopperSoftmax<T, HopperPrefillShape<D>>& softmax;
  const HopperTileState<HopperPrefillShape<D>>& st;
  int num_tiles, lane;
};

// The first key tile's scores and P, once Q and K_0 have landed (O is zero: nothing
// to rescale).
template <class T, int D, bool kPaged>
__device__ __forceinline__ void first_key_tile(const HopperMainloop<T, D, kPaged>& m) {
  ptx::cp_async_wait_group<HopperPrefillShape<D>::kStages - 1>();  // Q and K_0
  wgmma::fence_proxy_async_shared();
  __syncthreads();
  wgmma::fence();
  m.mma.issue_qk(0, m.st.s[0]);
  wgmma::wait<0>();
  fence_operands(m.st.s[0]);
  m.softmax.scores(m.p, m.keys, m.st, 0, m.lane);
  m.softmax.to_p(m.st);
}

// One key tile t: O += P_t V_t beside S_{t+1} = Q K_{t+1}^T and its softmax. kNext
// (compile-time, so that the wgmma groups in flight are known statically at every
// wait) when tile t + 1 exists and its scores are computed here.
template <bool kNext, class T, int D, bool kPaged>
__device__ __forceinline__ void key_tile(const HopperMainloop<T, D, kPaged>& m, int t) {
  const HopperTileState<HopperPrefillShape<D>>& st = m.st;
  ptx::cp_async_wait_group<HopperPrefillShape<D>::kStages - 2>();  // V_t and K_{t+1}
  wgmma::fence_proxy_async_shared();
  __syncthreads();  // ... landed for every thread; every warpgroup is done with tile t - 1
  fence_operands(st.o[0]);
  wgmma::fence();
  if constexpr (kNext) m.mma.issue_qk(t + 1, st.s[0]);
  m.mma.issue_pv(t, st.o[0], st.pa);
  // The next copies are issued while the tensor cores work, into free stages; then
  // the pages move on (here rather than in a member of the stages, which compiles
  // to other machine code).
  m.stages.copy_ahead(t, m.num_tiles);
  if constexpr (kPaged) {
    constexpr int kStages = HopperPrefillShape<D>::kStages;
    m.stages.v_page = m.stages.k_page;  // V_{t+S}'s page is K_{t+S}'s
    if (t + kStages + 1 < m.num_tiles) m.stages.k_page = m.stages.fetch_page(t + kStages + 1);
  }
  if constexpr (kNext) {
    wgmma::wait<1>();  // S_{t+1}; O += P_t V_t may still run
    fence_operands(st.s[0]);
    const bool changed = m.softmax.scores(m.p, m.keys, st, t + 1, m.lane);
    // Wait for O += P V only after the exponentials (the row sums), so that they
    // overlap it.
    wgmma::schedule_after(st.row_sum[0][0] + st.row_sum[0][1]);
    wgmma::wait<0>();
    fence_operands(st.o[0]);
    fence_operands(st.pa);
    if (changed) rescale_rows(st.o, st.rescale);
    m.softmax.to_p(st);
  } else {
    wgmma::wait<0>();
    fence_operands(st.o[0]);
  }
}

template <class T, int D, bool kPaged>
__global__ void __launch_bounds__(HopperPrefillShape<D>::kThreads, HopperPrefillShape<D>::kMinBlocks)
    prefill_kernel_sm90(const __grid_constant__ AttentionKernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = HopperPrefillShape<D>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const HopperSmem smem = align_hopper_smem(smem_raw);
  // The work item and its keys. The thread's indices come first: computed later, the
  // compiler lays out the kernel differently.
  detail::WorkItem item;
  if (!fetch_heaviest_item(p, item)) return;
  const detail::RequestInfo r = p.schedule.requests[item.request];
  wait_for_inputs();
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, warpgroup = int(threadIdx.x) / 128;
  const int rows = item.row_end - item.row_begin;
  const int group = p.heads.group_size;
  const ItemKeys keys = item_keys(p, item, r, nullptr);
  // A bad page id: no key tile (tile/bad_item.cuh).
  const bool bad_page = kDeviceIndexChecks && kPaged &&
                        any_bad_page<false>(p, item, item_page_missing(p, item, S::kThreads), smem.ptr + S::q);
  const int num_tiles = bad_page ? 0 : keys.num_tiles(S::kKeys);

  // Q, then the first stages of K and V (K_0's copies in Q's group).
  HopperKvStages<D, kPaged> stages(p, item, r, keys, smem.ptr);
  load_tile16<S::kThreads, S::kTileRows, D, SwizzledPanels>(
      smem.ptr + S::q, [&](int i) { return packed_q_row(p, item, r, group, i); }, rows);
  stages.start(num_tiles);

  // The mainloop's pieces and this thread's state.
  const HopperSoftmax<T, S> softmax(p, item, rows, lane, warp);
  const HopperMma<T, S> mma(smem.addr, warpgroup);
  float o[1][S::kVoFrags][4], s[1][S::kKeyFrags][4];
  std::uint32_t pa[S::kPvSteps][4];
  float row_max[1][2] = {{-INFINITY, -INFINITY}}, row_sum[1][2] = {{0.0f, 0.0f}};
#pragma unroll
  for (int c = 0; c < S::kVoFrags; ++c) o[0][c][0] = o[0][c][1] = o[0][c][2] = o[0][c][3] = 0.0f;
  float rescale[1][2];
  const HopperTileState<S> st{o, s, pa, row_max, row_sum, rescale};

  // The mainloop over the key tiles (the first one's scores before it), then the
  // epilogue.
  const HopperMainloop<T, D, kPaged> mainloop{p, keys, stages, mma, softmax, st, num_tiles, lane};
  if (num_tiles > 0) first_key_tile(mainloop);
  for (int t = 0; t + 1 < num_tiles; ++t) key_tile<true>(mainloop, t);
  if (num_tiles > 0) key_tile<false>(mainloop, num_tiles - 1);
  finish_hopper_item<D>(p, item, r, o, row_max, row_sum, softmax.sc, rows, num_tiles, smem.ptr + S::q);
  if (bad_page) mark_bad_chunk<false>(p, item, r, rows);
#endif
}

template <class T, int D, bool kPaged>
struct HopperPrefillKernel {
  static constexpr int kThreads = HopperPrefillShape<D>::kThreads;
  static constexpr int kSmem = HopperPrefillShape<D>::kSmem;
  static constexpr auto kernel = prefill_kernel_sm90<T, D, kPaged>;
  static void prepare() {
    KVINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  }
};

}  // namespace kvinfer::cuda
