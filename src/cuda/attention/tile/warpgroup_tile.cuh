// SPDX-License-Identifier: Apache-2.0
// A warpgroup's share of a 128-row query tile on sm_90a tensor cores, shared by the
// wgmma families (wgmma_prefill/, ws_prefill/): its wgmma descriptors over Q, K and V
// tiles in shared memory (64-column panels in the 128-byte swizzle), its registers
// (O, S, P and the rows' softmax state) and the online softmax of its rows. The shape
// S names the tile (kTileRows, kKeys, the fragment and step counts, kStages) and the
// offsets of Q, K and V in shared memory (q, k, v, k_stage, v_stage).
#pragma once

#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/item_keys.cuh"
#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/common/wgmma.cuh"

namespace kvinfer::cuda {

// The CTA's dynamic shared memory from its first 1024-byte boundary (the 128-byte
// swizzle's atoms), as a pointer and as a shared-window address (the descriptors').
struct HopperSmem {
  unsigned char* ptr;
  unsigned addr;
};
__device__ __forceinline__ HopperSmem align_hopper_smem(unsigned char* smem_raw) {
  const unsigned raw_addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
  const unsigned pad = (1024u - (raw_addr & 1023u)) & 1023u;
  return {smem_raw + pad, raw_addr + pad};
}

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
template <class T, class S>
struct HopperMma {
  using QK = wgmma::Mma<S::kKeys, T>;
  using PV = wgmma::Mma<S::kVoFrags * 8, T>;
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
template <class S>
struct HopperTileState {
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
template <class T, class S>
struct HopperSoftmax {
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
                                         const HopperTileState<S>& st, int t, int lane) const {
    const int key0 = keys.key_begin + t * S::kKeys;
    if (prescale) {
#pragma unroll
      for (int n = 0; n < S::kKeyFrags; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) st.s[0][n][e] *= p.logits.sm_scale_log2;
    }
    if (keys.needs_mask(key0, S::kKeys)) {
      mask_scores<false>(st.s, keys.mask, tok, key0, keys.key_end, lane, keys.key_begin);
    }
    return online_softmax(st.s, st.row_max, st.row_sum, st.rescale, sc);
  }
  __device__ __forceinline__ void to_p(const HopperTileState<S>& st) const {
#pragma unroll
    for (int j = 0; j < S::kPvSteps; ++j) p_fragment<T>(st.s[0], j, st.pa[j]);
  }
};

}  // namespace kvinfer::cuda
