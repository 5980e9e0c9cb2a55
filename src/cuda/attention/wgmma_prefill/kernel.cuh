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

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/epilogue.cuh"
#include "cuda/attention/tile/item_keys.cuh"
#include "cuda/attention/tile/kv_copy.cuh"
#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

template <int D>
struct HopperPrefillShape {
  static constexpr int kThreads = 256;  // two warpgroups
  static constexpr int kTileRows = 128;
  static constexpr int kKeys = 64;  // keys per tile
  static constexpr int kKeyFrags = kKeys / 8;
  static constexpr int kVoFrags = D / 8;
  static constexpr int kQkSteps = D / 16;
  static constexpr int kPvSteps = kKeys / 16;
  // Resident CTAs: head_dim 64 fits two in registers (<= 128 per thread) and
  // shared memory; 128 and 256 take one (up to 255 registers).
  static constexpr int kMinBlocks = D == 64 ? 2 : 1;
  // K and V stages: a copy has kStages - 1 iterations to land. Three where shared
  // memory allows (head_dim <= 128), two for head_dim 256.
  static constexpr int kStages = D <= 128 ? 3 : 2;
  // Shared memory: Q, then the stages of K, then those of V, each in 64-column panels.
  static constexpr int q = 0;
  static constexpr int k_stage = kKeys * D * 2;
  static constexpr int v_stage = kKeys * D * 2;
  static constexpr int k = q + kTileRows * D * 2;
  static constexpr int v = k + kStages * k_stage;
  static constexpr int bytes = v + kStages * v_stage;
  static constexpr int kSmem = bytes + 1024;  // slack to align the base to 1024 bytes (swizzle atoms)
};

// Epilogue of a whole (unsplit) item: each warpgroup normalises its 64 rows of O,
// stages them in 16-bit in its own rows of the Q tile (free: its last S = Q K^T has
// completed) with 16-byte chunks swizzled by row, and then writes them as whole
// 16-byte chunks, a row's head slice by consecutive threads (the accumulator layout
// would write 4 bytes per thread, 8 rows per instruction). LSE as in store_output.
template <class TO, int D, int kVoFrags>
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
    const float norm = sum > 0.0f ? p.v_scale / sum : 0.0f;
    // Fragment c holds columns [8c, 8c + 8): chunk c of the row, 4 bytes per thread.
#pragma unroll
    for (int c = 0; c < kVoFrags; ++c) {
      *reinterpret_cast<std::uint32_t*>(stage + swizzled_chunk<D>(row, c) * 16 + 4 * (lane % 4)) =
          mma::pack2<TO>(o[0][c][2 * h] * norm, o[0][c][2 * h + 1] * norm);
    }
    if (lane % 4 == 0 && p.lse && i < rows) store_row_lse(p, item, r, i, row_max[0][h], sc, sum);
  }
  // The warpgroup's rows are staged (named barriers 1 and 2: one per warpgroup).
  if (warpgroup == 0) {
    asm volatile("bar.sync 1, 128;" ::: "memory");
  } else {
    asm volatile("bar.sync 2, 128;" ::: "memory");
  }
  write_staged_rows<TO, D, 128, 64>(p, item, r, stage, warpgroup * 64, rows, int(threadIdx.x) % 128);
}

template <class T, class TO, int D, bool kPaged>
__global__ void __launch_bounds__(HopperPrefillShape<D>::kThreads, HopperPrefillShape<D>::kMinBlocks)
    prefill_kernel_sm90(const __grid_constant__ AttentionKernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = HopperPrefillShape<D>;
  using QK = wgmma::Mma<S::kKeys, T>;
  using PV = wgmma::Mma<D, T>;
  constexpr int kThreads = S::kThreads, kKeys = S::kKeys;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned raw_addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
  const unsigned pad = (1024u - (raw_addr & 1023u)) & 1023u;
  unsigned char* smem = smem_raw + pad;
  const unsigned base = raw_addr + pad;

  const int num_items = p.counts[0];
  if (int(blockIdx.x) >= num_items) return;
  const detail::WorkItem item = p.items[num_items - 1 - int(blockIdx.x)];  // heaviest first, as the tensor-core tile
  const detail::RequestInfo r = p.requests[item.request];
  wait_for_inputs();
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int warpgroup = int(threadIdx.x) / 128;
  const int rows = item.row_end - item.row_begin;
  const int group = p.group_size;

  const ItemKeys keys = item_keys(p, item, r, nullptr);
  const detail::RequestMask& mask = keys.mask;
  const int key_begin = keys.key_begin, key_end = keys.key_end;
  const int num_tiles = keys.num_tiles(kKeys);

  const auto q_row = [&](int i) { return packed_q_row(p, item, r, group, i); };
  // K and V rows. Four threads copy each key row of a tile (a thread owns one row, so
  // it looks the row up once per tile): thread q of the four copies chunks q + 4 j,
  // so that for each j the four read 64 contiguous bytes. Chunk q + 4 j lands in
  // panel j / 2 at swizzled chunk (q + 4 (j % 2)) ^ (row % 8) = that of j = 0 XOR 4 (j % 2).
  // Paged KV: the page id of a tile's row is read one iteration before its K copies
  // need it and kept for its V copies an iteration later, so no copy waits on a
  // page-table read (a dependent L2 round trip would stall the warps that compute).
  constexpr int kRowThreads = 4, kCopies = D / 8 / kRowThreads;
  static_assert(kThreads == kRowThreads * kKeys, "a thread per row quarter");
  const int key_row = int(threadIdx.x) / kRowThreads, quarter = int(threadIdx.x) % kRowThreads;
  const int dst0 = key_row * 128 + ((quarter ^ (key_row & 7)) * 16);
  const std::int32_t* pages = kPaged ? p.kv_indices + r.kv_begin : nullptr;
  const std::int64_t ragged_offset = kPaged ? 0 : std::int64_t(r.kv_begin);
  const char* k_base = static_cast<const char*>(p.k) +
                       (item.kv_head * p.k_stride_head + ragged_offset * p.k_stride_token) * 2 + quarter * 16;
  const char* v_base = static_cast<const char*>(p.v) +
                       (item.kv_head * p.v_stride_head + ragged_offset * p.v_stride_token) * 2 + quarter * 16;
  // Byte strides fit 32 bits (the launch checks; 32 x 32 -> 64-bit products are one
  // instruction each).
  const std::int32_t k_page_bytes = std::int32_t(p.k_stride_page * 2), k_token_bytes = std::int32_t(p.k_stride_token * 2);
  const std::int32_t v_page_bytes = std::int32_t(p.v_stride_page * 2), v_token_bytes = std::int32_t(p.v_stride_token * 2);
  // A key row's place in the paged cache: its page id and its slot in the page, both
  // found once per tile (the divmod is shared by the row's K and V copies).
  struct RowPlace {
    std::int32_t page, slot;
  };
  const auto fetch_page = [&](int t) -> RowPlace {
    if constexpr (kPaged) {
      const int key = min(key_begin + t * kKeys + key_row, key_end - 1);  // past the end: any valid row
      std::uint32_t slot;
      const std::uint32_t page_index = p.page_size.divmod(std::uint32_t(key), &slot);
      return {__ldg(pages + page_index), std::int32_t(slot)};
    } else {
      return {0, 0};
    }
  };
  const auto copy_row = [&](unsigned char* tile, const char* base, std::int32_t page_bytes, std::int32_t token_bytes,
                            int t, RowPlace place) {
    const int key = key_begin + t * kKeys + key_row;
    const bool ok = key < key_end;
    const char* src;
    if constexpr (kPaged) {
      src = base + std::int64_t(place.page) * page_bytes + place.slot * token_bytes;
    } else {
      src = base + std::int64_t(ok ? key : key_begin) * token_bytes;
    }
#pragma unroll
    for (int j = 0; j < kCopies; ++j) {
      ptx::cp_async_or_zero<16>(tile + (j / 2) * (kKeys * 128) + (dst0 ^ (64 * (j % 2))), src + 64 * j, ok);
    }
  };
  RowPlace k_page{0, 0}, v_page{0, 0};  // paged: places of the next K and V copies
  const auto load_k = [&](int t, RowPlace page) {
    copy_row(smem + S::k + (t % S::kStages) * S::k_stage, k_base, k_page_bytes, k_token_bytes, t, page);
  };
  const auto load_v = [&](int t, RowPlace page) {
    copy_row(smem + S::v + (t % S::kStages) * S::v_stage, v_base, v_page_bytes, v_token_bytes, t, page);
  };

  // Prologue: Q and K_0 (one group), then V_{j-1} and K_j for j < kStages (a group
  // each); then the pages of the first K the loop copies.
  load_tile16<kThreads, S::kTileRows, D, SwizzledPanels>(smem + S::q, q_row, rows);
  // The page ids of the first tiles are read together (one round trip, not one each).
  RowPlace first_pages[S::kStages + 1];
#pragma unroll
  for (int j = 0; j <= S::kStages; ++j) first_pages[j] = j < num_tiles ? fetch_page(j) : RowPlace{0, 0};
  if (num_tiles > 0) load_k(0, first_pages[0]);
  ptx::cp_async_commit();
#pragma unroll
  for (int j = 1; j < S::kStages; ++j) {
    if (j - 1 < num_tiles) load_v(j - 1, first_pages[j - 1]);
    if (j < num_tiles) load_k(j, first_pages[j]);
    ptx::cp_async_commit();
  }
  v_page = first_pages[S::kStages - 1];
  k_page = first_pages[S::kStages];

  // This thread's rows (accumulator rows g and g + 8 of its warp's 16).
  int tok[1][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = min(warp * 16 + lane / 4 + 8 * h, rows - 1);
    tok[0][h] = int(p.group_div.div(std::uint32_t(item.row_begin + i)));
  }
  // Raw scores with the base-2 scale folded into the exponent, unless the scale is
  // negative (then the max would be a min): scale first, as the tensor-core tile does.
  const bool prescale = p.sm_scale_log2 < 0.0f;
  const float sc = prescale ? 1.0f : p.sm_scale_log2;

  // Descriptors: the warpgroup's 64 rows of Q; K tiles (K-major, 8-row groups 1024
  // bytes apart); V tiles read MN-major (panels of 64 columns kKeys * 128 bytes apart).
  const std::uint64_t q_desc = wgmma::make_desc_sw128(base + S::q + unsigned(warpgroup) * 64 * 128, 16, 1024);
  const std::uint64_t k_desc = wgmma::make_desc_sw128(base + S::k, 16, 1024);
  const std::uint64_t v_desc = wgmma::make_desc_sw128(base + S::v, kKeys * 128, 1024);
  // Byte offsets enter the descriptor's address field in 16-byte units.
  const auto advance = [](std::uint64_t desc, unsigned bytes) { return desc + std::uint64_t(bytes >> 4); };

  const auto issue_qk = [&](int t, float (&s)[S::kKeyFrags][4]) {
    const unsigned stage = unsigned(t % S::kStages) * S::k_stage;
#pragma unroll
    for (int kk = 0; kk < S::kQkSteps; ++kk) {
      // k-step kk: panel kk / 4, 32 bytes per step inside the 128-byte row.
      const unsigned q_off = unsigned(kk / 4) * S::kTileRows * 128 + unsigned(kk % 4) * 32;
      const unsigned k_off = stage + unsigned(kk / 4) * kKeys * 128 + unsigned(kk % 4) * 32;
      QK::ss(s, advance(q_desc, q_off), advance(k_desc, k_off), kk > 0);
    }
    wgmma::commit();
  };
  const auto issue_pv = [&](int t, float (&o)[S::kVoFrags][4], const std::uint32_t (&pa)[S::kPvSteps][4]) {
    const unsigned stage = unsigned(t % S::kStages) * S::v_stage;
#pragma unroll
    for (int j = 0; j < S::kPvSteps; ++j) {
      PV::template rs<true>(o, pa[j], advance(v_desc, stage + unsigned(j) * 16 * 128), true);
    }
    wgmma::commit();
  };
  const auto fence_all = [](auto& regs) {
#pragma unroll
    for (auto& frag : regs)
#pragma unroll
      for (auto& x : frag) wgmma::fence_operand(x);
  };

  float o[1][S::kVoFrags][4];
  float s[1][S::kKeyFrags][4];
  std::uint32_t pa[S::kPvSteps][4];
  float row_max[1][2] = {{-INFINITY, -INFINITY}}, row_sum[1][2] = {{0.0f, 0.0f}};
#pragma unroll
  for (int c = 0; c < S::kVoFrags; ++c) o[0][c][0] = o[0][c][1] = o[0][c][2] = o[0][c][3] = 0.0f;

  // Scores of tile t (in s) to probabilities; returns whether O needs rescaling.
  float rescale[1][2];
  const auto softmax = [&](int t) {
    const int key0 = key_begin + t * kKeys;
    if (prescale) {
#pragma unroll
      for (int n = 0; n < S::kKeyFrags; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[0][n][e] *= p.sm_scale_log2;
    }
    if (keys.needs_mask(key0, kKeys)) {
      mask_scores<false>(s, mask, tok, key0, key_end, lane);
    }
    return online_softmax(s, row_max, row_sum, rescale, sc);
  };
  const auto to_p = [&] {
#pragma unroll
    for (int j = 0; j < S::kPvSteps; ++j) p_fragment<T>(s[0], j, pa[j]);
  };

  if (num_tiles > 0) {
    ptx::cp_async_wait_group<S::kStages - 1>();  // Q and K_0
    wgmma::fence_proxy_async_shared();
    __syncthreads();
    wgmma::fence();
    issue_qk(0, s[0]);
    wgmma::wait<0>();
    fence_all(s[0]);
    softmax(0);  // O is zero: nothing to rescale
    to_p();
  }
  // One key tile; kNext (compile-time, so that the wgmma groups in flight are known
  // statically at every wait) when tile t + 1 exists and its scores are computed here.
  const auto step = [&](int t, auto next_tag) {
    constexpr bool kNext = decltype(next_tag)::value;
    ptx::cp_async_wait_group<S::kStages - 2>();  // V_t and K_{t+1}
    wgmma::fence_proxy_async_shared();
    __syncthreads();  // ... landed for every thread; every warpgroup is done with tile t - 1
    fence_all(o[0]);
    wgmma::fence();
    if constexpr (kNext) issue_qk(t + 1, s[0]);
    issue_pv(t, o[0], pa);
    // The next copies are issued while the tensor cores work, into free stages:
    // K_{t+S} takes K_t's (read by S_t, completed in iteration t - 1) and V_{t+S-1}
    // takes V_{t-1}'s (read by O += P V of iteration t - 1), S = kStages.
    if (t + S::kStages < num_tiles) load_k(t + S::kStages, k_page);
    if (t + S::kStages - 1 < num_tiles) load_v(t + S::kStages - 1, v_page);
    ptx::cp_async_commit();
    if constexpr (kPaged) {
      v_page = k_page;  // V_{t+S}'s page is K_{t+S}'s
      if (t + S::kStages + 1 < num_tiles) k_page = fetch_page(t + S::kStages + 1);
    }
    if constexpr (kNext) {
      wgmma::wait<1>();  // S_{t+1}; O += P_t V_t may still run
      fence_all(s[0]);
      const bool changed = softmax(t + 1);
      // Wait for O += P V only after the exponentials, so that they overlap it: ptxas
      // schedules the wait as early as its operands allow, so it is made to depend on
      // the softmax through a vote on the row sums (a sum of exponentials is never
      // the all-ones NaN pattern; the trap marks that branch unreachable).
      if (!__any_sync(0xffffffffu, __float_as_uint(row_sum[0][0] + row_sum[0][1]) != 0xFFFFFFFFu)) __trap();
      wgmma::wait<0>();
      fence_all(o[0]);
      fence_all(pa);
      if (changed) rescale_rows(o, rescale);
      to_p();
    } else {
      wgmma::wait<0>();
      fence_all(o[0]);
    }
  };
  for (int t = 0; t + 1 < num_tiles; ++t) step(t, std::true_type{});
  if (num_tiles > 0) step(num_tiles - 1, std::false_type{});

  if (r.num_chunks > 1) {
    store_output<TO, D, 16>(p, item, r, o, row_max, row_sum, sc, rows, warp, lane);  // fp32 partial state
  } else {
    // An item without keys never waited for its Q tile, whose rows (copied by any
    // thread) the epilogue reuses: the copies land and the barrier orders them first.
    if (num_tiles == 0) {
      ptx::cp_async_wait_all();
      __syncthreads();
    }
    store_output_staged<TO, D>(p, item, r, o, row_max, row_sum, sc, rows, smem + S::q, warpgroup);
  }
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
