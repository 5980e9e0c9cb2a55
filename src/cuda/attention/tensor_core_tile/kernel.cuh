// SPDX-License-Identifier: Apache-2.0
// Prefill attention on tensor cores (mma.sync m16n8k16, ldmatrix, cp.async; sm_80
// and later), also the tensor-core decode. One work item per CTA: a tile of packed
// query rows (the query rows of a KV head's group, token-major) against a KV chunk,
// in key tiles of 64 (16 for the one-warp tile). Each warp owns 16 * kMmaM rows;
// S = Q K^T and O += P V accumulate in fp32 registers, P is reused from the S
// accumulators as the A operand. Q, K and V tiles sit in shared memory with 16-byte
// chunks XOR-swizzled by row so that ldmatrix is free of bank conflicts; the next K/V
// tile streams in (cp.async) while the current one is computed. fp8 KV lands in a
// staging buffer and is converted (exactly) to the query's type, fp16 and bf16 mixed
// are converted in place to bf16 (MmaOperand); RoPE rotates Q once
// and each K tile in shared memory. Per-element masking runs only on tiles the mask
// classifies as partial. The kernel is issue-bound (docs/kernels.md, "Tensor-core tile"), so every
// pass that a tile may not need sits behind a uniform branch. Included by its
// instance.cuh.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/bad_item.cuh"
#include "cuda/attention/tile/item_warps.cuh"
#include "cuda/attention/tile/key_access.cuh"
#include "cuda/attention/tile/math.cuh"
#include "cuda/attention/tile/epilogue.cuh"
#include "cuda/attention/tile/item_keys.cuh"
#include "cuda/attention/tile/kv_copy.cuh"
#include "cuda/attention/tile/logits.cuh"
#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/attention/tile/prepare_tile.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/attention/tile/tile_threads.cuh"
#include "cuda/attention/tile/warp_mma.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

// A CTA of kWarps row warps, each owning 16 * kMmaM query rows of the tile. An
// accumulator of more than 256 columns per row (128 registers per lane) leaves no
// registers for the rest, so wider heads (head_dim_vo 512) split O's columns into
// kVoSlices slices of 256: a row warp is then kVoSlices warps, each computing the
// same S = Q K^T (the same instructions on the same operands, so the same softmax
// state bit for bit) and O += P V for its slice of V's columns. S costs those warps
// kVoSlices times its FLOPs, which an exchange of partial scores through shared
// memory would save at a barrier per tile.
template <int DVO>
inline constexpr int kVoSlicesOf = DVO > 256 ? DVO / 256 : 1;
template <int DQK, int DVO, int kWarps, int kMmaM>
struct PrefillShape {
  static constexpr int kVoSlices = kVoSlicesOf<DVO>;
  static constexpr int kThreads = kWarps * kVoSlices * 32;
  static constexpr int kRowsPerWarp = 16 * kMmaM;
  static constexpr int kTileRows = kWarps * kRowsPerWarp;
  // Keys per tile. The one-warp (decode) tile is memory-bound: 16-key tiles (20 KiB
  // of shared memory, 199 registers) let 8 CTAs share an SM where 32-key tiles (37
  // KiB) let 6, so a batch's items fit in one wave more often (H200: 128 x 2k decode
  // 0.81 -> 0.96, fp8 KV 1.4x faster; docs/kernels.md, "Tensor-core tile"). Registers cap it at 8:
  // one-warp CTAs spread over the SM's four sub-partitions, whose 16K registers each
  // hold two such warps.
  // Heads of more than 256 dims take 32-key tiles: two stages of 64 keys of K and V at
  // head_dim 512 would be 256 KiB.
  static constexpr int kKeys = kWarps == 1 ? 16 : DQK + DVO > 512 ? 32 : 64;
  static constexpr int kQkSteps = DQK / 16;    // k-steps of S = Q K^T
  static constexpr int kKeyFrags = kKeys / 8;  // n8 fragments of S
  static constexpr int kSliceCols = DVO / kVoSlices;
  static constexpr int kVoFrags = kSliceCols / 8;  // n8 fragments of a warp's O
  static_assert(DQK % 64 == 0 && DVO % 64 == 0, "head dims are multiples of 64 (whole swizzle groups)");
  static_assert(kSliceCols % 64 == 0, "a slice starts on a swizzle group");
};

// Byte offsets of the shared-memory regions. 16-bit KV is double-buffered in the
// swizzled compute tiles; fp8 KV is double-buffered in raw staging tiles and
// converted into single compute tiles.
template <class TKV, int DQK, int DVO, int kWarps, int kMmaM>
struct PrefillSmem {
  using S = PrefillShape<DQK, DVO, kWarps, kMmaM>;
  static constexpr bool kStaged = sizeof(TKV) == 1;
  static constexpr int kComputeStages = kStaged ? 1 : 2;
  static constexpr int k_stage = S::kKeys * DQK * 2;  // bytes of one compute K tile
  static constexpr int v_stage = S::kKeys * DVO * 2;
  static constexpr int raw_stage = kStaged ? S::kKeys * (DQK + DVO) : 0;  // K then V, fp8
  static constexpr int q = 0;
  static constexpr int k = q + S::kTileRows * DQK * 2;
  static constexpr int v = k + kComputeStages * k_stage;
  static constexpr int raw = v + kComputeStages * v_stage;
  static constexpr int freq = raw + 2 * raw_stage;  // RoPE inverse frequencies
  static constexpr int bytes = freq + DQK / 2 * int(sizeof(float));
  static constexpr int kTileBytes = (bytes + 127) / 128 * 128;  // one item warp's share of a CTA's
};

// Threads per CTA and resident CTAs asked of the register allocator: 2 CTAs of 128
// threads may use 255 registers per thread, and so may one of 256 threads or 8 one-warp
// CTAs (the decode tile: two warps per SM sub-partition, whichever count up to 255 it
// takes), or one CTA of 8 item warps of that tile (item_warps.cuh); narrow tiles (4
// warps of 16 rows) of head_dim <= 128 fit 3.
// Column-sliced tiles (head_dim_vo > 256) ask for 2 CTAs of the one-row-warp tile
// (its shared memory holds 2) and one of the others.
template <int DVO, int kWarps, bool kItemWarps>
inline constexpr int kPrefillMaxThreads =
    (kItemWarps ? kMaxItemWarps : kWarps * kVoSlicesOf<DVO>) * 32;
template <int DVO, int kWarps, int kMmaM, bool kItemWarps>
inline constexpr int kPrefillMinBlocks =
    kItemWarps ? 1
    : DVO > 256 ? (kWarps == 1 ? 2 : 1)
    : kWarps == 1 ? 8
    : kWarps == 8 ? 1
                  : (kMmaM == 2 || DVO > 128 ? 2 : 3);

// The CTA's work item. The one-warp (decode) tile takes the items in the plan's order
// and learns from its own entry whether it has one (unused_item): one dependent load
// fewer before its first copies than reading the count first. Its items are alike
// (every row of a request). The planner lists a request's row tiles in order, so under
// a causal mask the heaviest come last: larger tiles start from the end so that those
// do not form the tail. False: the CTA has no item (the grid is sized for the capacity).
template <bool kOneWarp>
__device__ __forceinline__ bool fetch_item(const AttentionKernelParams& p, detail::WorkItem& item) {
  if constexpr (kOneWarp) {
    item = load_work_item(p.schedule.items + blockIdx.x);
    return !unused_item(item);
  } else {
    const int num_items = p.schedule.counts[0];
    if (int(blockIdx.x) >= num_items) return false;
    item = p.schedule.items[num_items - 1 - int(blockIdx.x)];
    return true;
  }
}

// An item's K/V tiles in the tile's two stages: tile t (keys key_begin + t * step)
// lands in stage t % 2, in the compute tiles for 16-bit KV, in the staging tiles for
// fp8. A one-warp tile passes the pages it looked up ahead.
template <class TKV, int DQK, int DVO, int kWarps, int kMmaM, bool kItemWarps, bool kPadded = false>
struct TileStages {
  using S = PrefillShape<DQK, DVO, kWarps, kMmaM>;
  using L = PrefillSmem<TKV, DQK, DVO, kWarps, kMmaM>;
  unsigned char* smem;
  KeyLocator locate;
  KeyRow k_row, v_row;
  int key_begin, key_end, step;
  HeadDims dims;  // kPadded: the problem's, zeros past them
  __device__ __forceinline__ void load(int t, const PagesAhead<S::kKeys>* pages) const {
    const int key0 = key_begin + t * step, stage = t & 1;
    if constexpr (L::kStaged) {
      unsigned char* raw = smem + L::raw + stage * L::raw_stage;
      load_kv_tile<TKV, S::kThreads, S::kKeys, DQK, DVO, kItemWarps, kPadded>(
          raw, raw + S::kKeys * DQK, locate, k_row, v_row, key0, key_end - key0, pages, dims.qk / 8, dims.vo / 8);
    } else {
      load_kv_tile<TKV, S::kThreads, S::kKeys, DQK, DVO, kItemWarps, kPadded>(
          smem + L::k + stage * L::k_stage, smem + L::v + stage * L::v_stage, locate, k_row, v_row, key0,
          key_end - key0, pages, dims.qk / 8, dims.vo / 8);
    }
  }
};

// The mma's operand type: the query's, into which fp8 KV is converted exactly; where
// fp16 and bf16 mix (the `full` preset), bf16, the fp16 side rounded to it (bf16's
// range holds every fp16 value; the products take bf16's precision, as the tolerance
// model of the tests says: docs/semantics.md, "Mixed fp16 and bf16").
template <class TQ, class TKV>
using MmaOperand = std::conditional_t<sizeof(TKV) == 2 && !std::is_same_v<TQ, TKV>, __nv_bfloat16, TQ>;

// Makes tile t's stage ready for the mma where it is not: fp8 K and V converted from
// the staging tile into the compute tiles, K and V of the other 16-bit type converted
// in place, RoPE applied to K (and, before the first tile, to Q at its tokens'
// diagonal positions; Q of the other 16-bit type converted there). A barrier of the
// tile's threads follows; tiles of 16-bit KV of the mma's type without RoPE need none.
// kPadded: rows of the problem's head dims zero-padded to the tile's
// (prepare_padded_tile), every pass of prepare_tile done by that one.
template <class TQ, class TKV, int DQK, int DVO, int kWarps, int kMmaM, bool kItemWarps, bool kPadded = false>
__device__ __forceinline__ void prepare_stage(unsigned char* smem, bool rope, int t, int key0,
                                              const detail::WorkItem& item, int rows, int group,
                                              const detail::RequestMask& mask, HeadDims dims) {
  using S = PrefillShape<DQK, DVO, kWarps, kMmaM>;
  using L = PrefillSmem<TKV, DQK, DVO, kWarps, kMmaM>;
  using T = MmaOperand<TQ, TKV>;
  constexpr int kThreads = S::kThreads, kKeys = S::kKeys;
  constexpr bool kConvertQ = !std::is_same_v<TQ, T>;
  constexpr bool kConvertKV = sizeof(TKV) == 2 && !std::is_same_v<TKV, T>;
  if (!L::kStaged && !kConvertKV && !rope && !(kConvertQ && t == 0)) return;
  const float* freq = reinterpret_cast<const float*>(smem + L::freq);
  const auto q_pos = [&](int i) {
    const int packed = item.row_begin + min(i, rows - 1);
    return float(mask.diagonal(packed / group));
  };
  if constexpr (kPadded) {
    static_assert(!kItemWarps, "the padded tile has no item warps");
    const int stage = t & 1;
    const unsigned char* raw = smem + L::raw + stage * L::raw_stage;
    unsigned char* k_tile = smem + L::k + (L::kStaged ? 0 : stage * L::k_stage);
    const auto no_pos = [](int) { return 0.0f; };
    if (t == 0 && (rope || kConvertQ)) {
      prepare_padded_tile<T, TQ, kThreads, S::kTileRows, DQK>(smem + L::q, nullptr, rope ? freq : nullptr, q_pos,
                                                              dims.qk);
    }
    prepare_padded_tile<T, TKV, kThreads, kKeys, DQK>(k_tile, raw, rope ? freq : nullptr,
                                                      [&](int i) { return float(key0 + i); }, dims.qk);
    if constexpr (L::kStaged) {
      prepare_padded_tile<T, TKV, kThreads, kKeys, DVO>(smem + L::v, raw + kKeys * DQK, nullptr, no_pos, dims.vo);
    } else if constexpr (kConvertKV) {
      prepare_padded_tile<T, TKV, kThreads, kKeys, DVO>(smem + L::v + stage * L::v_stage, nullptr, nullptr, no_pos,
                                                        dims.vo);
    }
    __syncthreads();
    return;
  }
  if constexpr (kConvertQ) {
    if (t == 0) prepare_tile<T, TQ, kThreads, S::kTileRows, DQK, kItemWarps>(smem + L::q, nullptr, rope ? freq : nullptr, q_pos);
  } else if (t == 0 && rope) {
    prepare_tile<T, T, kThreads, S::kTileRows, DQK, kItemWarps>(smem + L::q, nullptr, freq, q_pos);
  }
  const int stage = t & 1;
  const unsigned char* raw = smem + L::raw + stage * L::raw_stage;
  unsigned char* k_tile = smem + L::k + (L::kStaged ? 0 : stage * L::k_stage);
  prepare_tile<T, TKV, kThreads, kKeys, DQK, kItemWarps>(k_tile, raw, rope ? freq : nullptr,
                                                         [&](int i) { return float(key0 + i); });
  if constexpr (L::kStaged) {
    prepare_tile<T, TKV, kThreads, kKeys, DVO, kItemWarps>(smem + L::v, raw + kKeys * DQK, nullptr,
                                                           [](int) { return 0.0f; });
  } else if constexpr (kConvertKV) {
    prepare_tile<T, TKV, kThreads, kKeys, DVO, kItemWarps>(smem + L::v + stage * L::v_stage, nullptr, nullptr,
                                                           [](int) { return 0.0f; });
  }
  tile_sync<kItemWarps>();
}

// The epilogue of an item: item warps merge their states in the CTA (item_warps.cuh);
// a split chunk, or unequal head dims, write O and LSE directly (the partial state);
// a whole item stages its O in its warps' rows of the Q tile (store_output_warp_staged;
// column slices share their row warp's rows, so the CTA stages and writes them
// together). A slice writes its columns of O; the first slice writes the LSE.
template <int DQK, int DVO, class TKV, int kWarps, int kMmaM, bool kItemWarps, bool kPadded, int kVoFrags>
__device__ __forceinline__ void finish_item(const AttentionKernelParams& p, const detail::WorkItem& item,
                                            const detail::RequestInfo& r, const float (&o)[kMmaM][kVoFrags][4],
                                            const float (&row_max)[kMmaM][2], const float (&row_sum)[kMmaM][2],
                                            float sc, int rows, int num_tiles, unsigned char* smem_cta,
                                            unsigned char* smem, int warp, int slice, int lane) {
  using S = PrefillShape<DQK, DVO, kWarps, kMmaM>;
  using L = PrefillSmem<TKV, DQK, DVO, kWarps, kMmaM>;
  const OutputSlice out_slice{slice * S::kSliceCols, slice == 0};
  if constexpr (kItemWarps) {
    static_assert(L::bytes - L::k >= kWarpStateBytes<DVO>, "a warp's state fits in its K/V stages");
    ptx::cp_async_wait_all();  // no copy still lands in the stages the state reuses
    tile_sync<kItemWarps>();
    stash_warp_state<DVO>(p, o, row_max, row_sum, sc, lane, smem + L::k);
    merge_item_warps<DVO>(
        p, item, r, rows, [&](int w) { return smem_cta + w * L::kTileBytes + L::k; },
        [&](int i) { return packed_row(p, item, p.heads.group_size, i); });
  } else if (r.num_chunks > 1 || DQK != DVO) {
    store_output<DVO, S::kRowsPerWarp, kPadded>(p, item, r, o, row_max, row_sum, sc, rows, warp, lane, out_slice);
  } else if constexpr (S::kVoSlices > 1) {
    // Every slice's last S = Q K^T has read the Q rows before any stages O there.
    if (num_tiles == 0) ptx::cp_async_wait_all();
    __syncthreads();
    stage_output_rows<DVO, S::kRowsPerWarp>(p, item, r, o, row_max, row_sum, sc, rows,
                                             smem + L::q + warp * S::kRowsPerWarp * DQK * 2, warp, lane, out_slice);
    __syncthreads();
    write_staged_rows<DVO, S::kThreads, S::kTileRows, kPadded>(p, item, r, smem + L::q, 0, rows, int(threadIdx.x));
  } else {
    // An item without keys never waited for its Q tile, whose rows (copied by any
    // thread) the epilogue reuses: the copies land and the barrier orders them first.
    if (num_tiles == 0) {
      ptx::cp_async_wait_all();
      tile_sync<kItemWarps>();
    }
    store_output_warp_staged<DVO, S::kRowsPerWarp, kPadded>(p, item, r, o, row_max, row_sum, sc, rows,
                                                   smem + L::q + warp * S::kRowsPerWarp * DQK * 2, warp, lane);
  }
}

// kGeneral adds the custom mask, ALiBi and the soft cap to the logits; without it
// (the common case) those registers are free for the accumulators. kItemWarps: the
// one-warp tile's instance whose CTA runs one item on blockDim.x / 32 warps
// (item_warps.cuh); the plain instance is the code it was before item warps. kPadded:
// the padded tile (padded_tile/): the problem's head dims (p.dims) are smaller than the
// instance's, its rows copied, rotated and written up to them and zero-padded past.
template <class TQ, class TKV, int DQK, int DVO, int kWarps, int kMmaM, bool kGeneral, bool kItemWarps,
          bool kPadded = false>
__global__ void __launch_bounds__(kPrefillMaxThreads<DVO, kWarps, kItemWarps>,
                                  kPrefillMinBlocks<DVO, kWarps, kMmaM, kItemWarps>)
    prefill_kernel(const __grid_constant__ AttentionKernelParams p) {
  static_assert(!kItemWarps || (kWarps == 1 && kMmaM == 1 && !kGeneral), "item warps: the one-warp tile");
  using S = PrefillShape<DQK, DVO, kWarps, kMmaM>;
  using L = PrefillSmem<TKV, DQK, DVO, kWarps, kMmaM>;
  using T = MmaOperand<TQ, TKV>;
  constexpr int kThreads = S::kThreads, kKeys = S::kKeys, kRowsPerWarp = S::kRowsPerWarp;
  constexpr bool kOneWarp = kThreads == 32;
  extern __shared__ __align__(128) unsigned char smem_cta[];
  detail::WorkItem item;
  if (!fetch_item<kOneWarp>(p, item)) return;
  const KeyLocator locate = item_locator(p, item);
  const detail::RequestInfo r = p.schedule.requests[item.request];
  wait_for_inputs();
  // A one-warp CTA (the decode tile) looks up the pages of tile t + 2 as it computes
  // tile t (PagesAhead); larger CTAs look them up as they copy. The first two tiles'
  // lookups leave while the request's entry is in flight, for the keys the item alone
  // gives (item_keys_ahead), and are redone in the rare case that it clips them.
  PagesAhead<kKeys> ahead;
  ItemKeys guess{};
  if constexpr (kOneWarp) {
    guess = item_keys_ahead<kItemWarps>(item, kKeys);
    if (guess.key_end > guess.key_begin) ahead.start(locate, guess.key_begin, guess.tile_step(kKeys), guess.key_end);
  }
  // A bad page id: no key tile (tile/bad_item.cuh).
  const bool bad_page = kDeviceIndexChecks && any_bad_page<kOneWarp && !kItemWarps>(
                                                  p, item, item_page_missing(p, item, int(blockDim.x)), smem_cta);
  // Warps of a larger tile split its rows; the one-warp tile's CTA holds item_warps
  // warps (item_warps.cuh), each a tile of its own over its share of the keys.
  // A row warp's column slices are consecutive warps (PrefillShape).
  const int lane = int(threadIdx.x) % 32, warp_index = kItemWarps ? 0 : int(threadIdx.x) / 32;
  const int warp = warp_index / S::kVoSlices, slice = warp_index % S::kVoSlices;
  unsigned char* smem = kItemWarps ? smem_cta + int(threadIdx.x) / 32 * L::kTileBytes : smem_cta;
  const int rows = item.row_end - item.row_begin;
  ItemKeys keys =
      item_keys(p, item, r, kGeneral && p.mask.custom_bits ? p.mask.custom_bits + r.mask_offset : nullptr);
  if constexpr (kItemWarps) keys.keep_warp_turns(int(threadIdx.x) / 32, int(blockDim.x) / 32, kKeys);
  const int key_begin = keys.key_begin, key_end = keys.key_end, num_tiles = bad_page ? 0 : keys.num_tiles(kKeys);
  const int step = kItemWarps ? keys.tile_step(kKeys) : kKeys;  // tile t: key_begin + t * step

  // The swizzled addressing (SwizzledLane) needs 128-byte aligned tiles.
  if ((static_cast<unsigned>(__cvta_generic_to_shared(smem)) & 127u) != 0) __trap();
  unsigned char* sq = smem + L::q;
  float* freq = reinterpret_cast<float*>(smem + L::freq);
  load_tile16<kThreads, S::kTileRows, DQK, SwizzledRows, kItemWarps, kPadded>(
      sq, [&](int i) { return packed_q_row(p, item, r, p.heads.group_size, i); }, rows, p.dims.qk / 8);
  const ItemRows kv_rows = item_rows(p, item, sizeof(TKV));
  const TileStages<TKV, DQK, DVO, kWarps, kMmaM, kItemWarps, kPadded> stages{
      smem, locate, kv_rows.k, kv_rows.v, key_begin, key_end, step, p.dims};
  const PagesAhead<kKeys>* pages = kOneWarp ? &ahead : nullptr;
  if (num_tiles > 0) {
    if constexpr (kOneWarp) {
      if (key_begin != guess.key_begin || key_end != guess.key_end) ahead.start(locate, key_begin, step, key_end);
    }
    stages.load(0, pages);
    if constexpr (kOneWarp) {
      if (num_tiles > 1) ahead.fetch(locate, key_begin + step, key_end);
    }
  }
  ptx::cp_async_commit();
  const bool rope = p.logits.rope;
  if (rope) {
    const int rope_dims = kPadded ? p.dims.qk : DQK;  // RoPE's D: the problem's
    for (int d = tile_thread<kItemWarps>(); d < rope_dims / 2; d += kThreads) {
      freq[d] = p.logits.rope_rcp_scale * powf(p.logits.rope_rcp_theta, float(2 * d) / float(rope_dims));
    }
  }
  const ThreadRows<kMmaM> trows = thread_rows<kMmaM, kGeneral>(p, item, warp * kRowsPerWarp, lane, rows);
  const LogitsMode logits = logits_mode<kGeneral>(p);
  // ldmatrix lanes (warp_mma.cuh): Q and K for S = Q K^T, V for O += P V.
  const SwizzledLane<DQK> q_lane(sq, warp * kRowsPerWarp + lane % 16, lane / 16);
  const SwizzledLane<DQK> k_lane(smem + L::k, lane % 8 + (lane / 16) * 8, (lane / 8) % 2);
  const SwizzledLane<DVO> v_lane(smem + L::v, lane % 8 + ((lane / 8) % 2) * 8, lane / 16, slice * S::kSliceCols / 8);
  float o[kMmaM][S::kVoFrags][4], row_max[kMmaM][2], row_sum[kMmaM][2];
  zero_softmax_state(o, row_max, row_sum);

  for (int t = 0; t < num_tiles; ++t) {
    const int key0 = key_begin + t * step;
    // The next tile streams in while this one is computed (its stage was released by
    // the barrier that ended the previous iteration).
    if (t + 1 < num_tiles) stages.load(t + 1, pages);
    if constexpr (kOneWarp) {
      if (t + 2 < num_tiles) ahead.fetch(locate, key0 + 2 * step, key_end);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait_group<1>();
    tile_sync<kItemWarps>();
    prepare_stage<TQ, TKV, DQK, DVO, kWarps, kMmaM, kItemWarps, kPadded>(smem, rope, t, key0, item, rows,
                                                                        p.heads.group_size, keys.mask, p.dims);
    const unsigned k_off = L::kStaged ? 0u : unsigned((t & 1) * L::k_stage);
    const unsigned v_off = L::kStaged ? 0u : unsigned((t & 1) * L::v_stage);
    float s[kMmaM][S::kKeyFrags][4];
    warp_qk<T, kMmaM, kKeys, DQK>(s, q_lane, k_lane, k_off);
    transform_logits<kGeneral>(s, p, logits.fast, logits.prescale, trows.slope, trows.tok, keys.mask, key0, lane);
    if (keys.needs_mask(key0, kKeys)) mask_scores<kGeneral>(s, keys.mask, trows.tok, key0, key_end, lane);
    float rescale[kMmaM][2];
    if (online_softmax(s, row_max, row_sum, rescale, logits.sc)) rescale_rows(o, rescale);
    warp_pv<T, kMmaM, kKeys, DVO, S::kVoFrags>(o, s, v_lane, v_off);
    tile_sync<kItemWarps>();  // every warp is done with this stage before it is refilled
  }
  finish_item<DQK, DVO, TKV, kWarps, kMmaM, kItemWarps, kPadded>(p, item, r, o, row_max, row_sum, logits.sc, rows,
                                                            num_tiles, smem_cta, smem, warp, slice, lane);
  if (bad_page) mark_bad_chunk<kOneWarp && !kItemWarps>(p, item, r, rows);
}

template <class TQ, class TKV, int DQK, int DVO, int kWarps, int kMmaM, bool kGeneral,
          bool kItemWarps_ = false, bool kPadded = false>
struct PrefillKernel {
  // Of one tile (of one item warp with kItemWarps): its row warps and their column slices.
  static constexpr int kThreads = PrefillShape<DQK, DVO, kWarps, kMmaM>::kThreads;
  static constexpr int kSmem = PrefillSmem<TKV, DQK, DVO, kWarps, kMmaM>::bytes;
  static constexpr auto kernel = prefill_kernel<TQ, TKV, DQK, DVO, kWarps, kMmaM, kGeneral, kItemWarps_, kPadded>;
  // The item-warp instance: W warps per CTA, kTileSmem bytes each, up to kMaxItemWarps
  // or what the current device's shared memory per CTA allows.
  static constexpr bool kItemWarps = kItemWarps_;
  static constexpr int kTileSmem = PrefillSmem<TKV, DQK, DVO, kWarps, kMmaM>::kTileBytes;
  static int max_item_warps() { return kItemWarps ? item_warps_fitting(kTileSmem) : 1; }
  // Dynamic shared memory above 48 KiB must be allowed per kernel (per device): one
  // tile's, or the most item warps'.
  static void prepare() {
    const int bytes = kItemWarps ? max_item_warps() * kTileSmem : kSmem;
    KVINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
};

}  // namespace kvinfer::cuda
