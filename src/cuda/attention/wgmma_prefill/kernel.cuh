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
#include "cuda/attention/tile/item_keys.cuh"
#include "cuda/attention/tile/kv_copy.cuh"
#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/attention/wgmma_prefill/epilogue.cuh"
#include "cuda/attention/wgmma_prefill/stages.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

// The CTA's work item, heaviest first as the tensor-core tile takes them (the planner
// lists a request's row tiles in order, so under a causal mask the heaviest come
// last). False: the CTA has no item (the grid is sized for the capacity).
__device__ __forceinline__ bool fetch_heaviest_item(const AttentionKernelParams& p, detail::WorkItem& item) {
  const int num_items = p.schedule.counts[0];
  if (int(blockIdx.x) >= num_items) return false;
  item = p.schedule.items[num_items - 1 - int(blockIdx.x)];
  return true;
}

// The warpgroup's tensor-core work from shared memory. Descriptors: the warpgroup's
// 64 rows of Q; K tiles (K-major, 8-row groups 1024 bytes apart); V tiles read
// MN-major (panels of 64 columns kKeys * 128 bytes apart).
template <class T, int D>
struct HopperMma {
  using S = HopperPrefillShape<D>;
  using QK = wgmma::Mma<S::kKeys, T>;
  using PV = wgmma::Mma<D, T>;
  std::uint64_t q_desc, k_desc, v_desc;
  __device__ __forceinline__ HopperMma(unsigned base, int warpgroup)
      : q_desc(wgmma::make_desc_sw128(base + S::q + unsigned(warpgroup) * 64 * 128, 16, 1024)),
        k_desc(wgmma::make_desc_sw128(base + S::k, 16, 1024)),
        v_desc(wgmma::make_desc_sw128(base + S::v, S::kKeys * 128, 1024)) {}
  // Byte offsets enter the descriptor's address field in 16-byte units.
  __device__ __forceinline__ static std::uint64_t advance(std::uint64_t desc, unsigned bytes) {
    return desc + std::uint64_t(bytes >> 4);
  }
  // S = Q K_t^T, one group.
  __device__ __forceinline__ void issue_qk(int t, float (&s)[S::kKeyFrags][4]) const {
    const unsigned stage = unsigned(t % S::kStages) * S::k_stage;
#pragma unroll
    for (int kk = 0; kk < S::kQkSteps; ++kk) {
      // k-step kk: panel kk / 4, 32 bytes per step inside the 128-byte row.
      const unsigned q_off = unsigned(kk / 4) * S::kTileRows * 128 + unsigned(kk % 4) * 32;
      const unsigned k_off = stage + unsigned(kk / 4) * S::kKeys * 128 + unsigned(kk % 4) * 32;
      QK::ss(s, advance(q_desc, q_off), advance(k_desc, k_off), kk > 0);
    }
    wgmma::commit();
  }
  // O += P V_t, one group.
  __device__ __forceinline__ void issue_pv(int t, float (&o)[S::kVoFrags][4],
                                           const std::uint32_t (&pa)[S::kPvSteps][4]) const {
    const unsigned stage = unsigned(t % S::kStages) * S::v_stage;
#pragma unroll
    for (int j = 0; j < S::kPvSteps; ++j) {
      PV::template rs<true>(o, pa[j], advance(v_desc, stage + unsigned(j) * 16 * 128), true);
    }
    wgmma::commit();
  }
};

// Keeps every register of a wgmma operand (an array of fragments) in place across
// the fence or wait around it.
template <class Fragments>
__device__ __forceinline__ void fence_operands(Fragments& regs) {
#pragma unroll
  for (auto& frag : regs)
#pragma unroll
    for (auto& x : frag) wgmma::fence_operand(x);
}

// This thread's share of its warpgroup's state: O, the scores of the next tile (made
// probabilities in place), P as the A fragments of O += P V, and its rows' running
// maxima, sums and rescale factors: references to the kernel's own arrays (a struct
// holding the arrays themselves compiles to other machine code at head_dim 64).
template <int D>
struct HopperTileState {
  using S = HopperPrefillShape<D>;
  float (&o)[1][S::kVoFrags][4];
  float (&s)[1][S::kKeyFrags][4];
  std::uint32_t (&pa)[S::kPvSteps][4];
  float (&row_max)[1][2];
  float (&row_sum)[1][2];
  float (&rescale)[1][2];
};

// The softmax of this thread's rows (accumulator rows g and g + 8 of its warp's 16).
// Raw scores with the base-2 scale folded into the exponent, unless the scale is
// negative (then the max would be a min): scale first, as the tensor-core tile does.
// The params and the item's keys come with each call: held here as references, they
// change the machine code of the whole kernel.
template <class T, int D>
struct HopperSoftmax {
  using S = HopperPrefillShape<D>;
  int tok[1][2];
  bool prescale;
  float sc;
  __device__ __forceinline__ HopperSoftmax(const AttentionKernelParams& p, const detail::WorkItem& item, int rows,
                                           int lane, int warp) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = min(warp * 16 + lane / 4 + 8 * h, rows - 1);
      tok[0][h] = int(p.heads.group_div.div(std::uint32_t(item.row_begin + i)));
    }
    prescale = p.logits.sm_scale_log2 < 0.0f;
    sc = prescale ? 1.0f : p.logits.sm_scale_log2;
  }
  // Scores of tile t (in st.s) to probabilities; returns whether O needs rescaling.
  __device__ __forceinline__ bool scores(const AttentionKernelParams& p, const ItemKeys& keys,
                                         const HopperTileState<D>& st, int t, int lane) const {
    const int key0 = keys.key_begin + t * S::kKeys;
    if (prescale) {
#pragma unroll
      for (int n = 0; n < S::kKeyFrags; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) st.s[0][n][e] *= p.logits.sm_scale_log2;
    }
    if (keys.needs_mask(key0, S::kKeys)) {
      mask_scores<false>(st.s, keys.mask, tok, key0, keys.key_end, lane);
    }
    return online_softmax(st.s, st.row_max, st.row_sum, st.rescale, sc);
  }
  __device__ __forceinline__ void to_p(const HopperTileState<D>& st) const {
#pragma unroll
    for (int j = 0; j < S::kPvSteps; ++j) p_fragment<T>(st.s[0], j, st.pa[j]);
  }
};

// What each key tile of the mainloop works with: the params, the item's keys, its
// K/V stages, the warpgroup's mma, the softmax and the state of this thread's rows.
template <class T, int D, bool kPaged>
struct HopperMainloop {
  const AttentionKernelParams& p;
  const ItemKeys& keys;
  HopperKvStages<D, kPaged>& stages;
  const HopperMma<T, D>& mma;
  const HopperSoftmax<T, D>& softmax;
  const HopperTileState<D>& st;
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
  const HopperTileState<D>& st = m.st;
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
    // Wait for O += P V only after the exponentials, so that they overlap it: ptxas
    // schedules the wait as early as its operands allow, so it is made to depend on
    // the softmax through a vote on the row sums (a sum of exponentials is never
    // the all-ones NaN pattern; the trap marks that branch unreachable).
    if (!__any_sync(0xffffffffu, __float_as_uint(st.row_sum[0][0] + st.row_sum[0][1]) != 0xFFFFFFFFu)) __trap();
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

template <class T, class TO, int D, bool kPaged>
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
  const int num_tiles = keys.num_tiles(S::kKeys);

  // Q, then the first stages of K and V (K_0's copies in Q's group).
  HopperKvStages<D, kPaged> stages(p, item, r, keys, smem.ptr);
  load_tile16<S::kThreads, S::kTileRows, D, SwizzledPanels>(
      smem.ptr + S::q, [&](int i) { return packed_q_row(p, item, r, group, i); }, rows);
  stages.start(num_tiles);

  // The mainloop's pieces and this thread's state.
  const HopperSoftmax<T, D> softmax(p, item, rows, lane, warp);
  const HopperMma<T, D> mma(smem.addr, warpgroup);
  float o[1][S::kVoFrags][4], s[1][S::kKeyFrags][4];
  std::uint32_t pa[S::kPvSteps][4];
  float row_max[1][2] = {{-INFINITY, -INFINITY}}, row_sum[1][2] = {{0.0f, 0.0f}};
#pragma unroll
  for (int c = 0; c < S::kVoFrags; ++c) o[0][c][0] = o[0][c][1] = o[0][c][2] = o[0][c][3] = 0.0f;
  float rescale[1][2];
  const HopperTileState<D> st{o, s, pa, row_max, row_sum, rescale};

  // The mainloop over the key tiles (the first one's scores before it), then the
  // epilogue.
  const HopperMainloop<T, D, kPaged> mainloop{p, keys, stages, mma, softmax, st, num_tiles, lane};
  if (num_tiles > 0) first_key_tile(mainloop);
  for (int t = 0; t + 1 < num_tiles; ++t) key_tile<true>(mainloop, t);
  if (num_tiles > 0) key_tile<false>(mainloop, num_tiles - 1);
  finish_hopper_item<TO, D>(p, item, r, o, row_max, row_sum, softmax.sc, rows, num_tiles, smem.ptr + S::q);
#endif
}

template <class T, class TO, int D, bool kPaged>
struct HopperPrefillKernel {
  static constexpr int kThreads = HopperPrefillShape<D>::kThreads;
  static constexpr int kSmem = HopperPrefillShape<D>::kSmem;
  static constexpr auto kernel = prefill_kernel_sm90<T, TO, D, kPaged>;
  static void prepare() {
    KVINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  }
};

}  // namespace kvinfer::cuda
