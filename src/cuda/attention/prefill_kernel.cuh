// SPDX-License-Identifier: Apache-2.0
// Prefill attention on tensor cores (mma.sync m16n8k16, ldmatrix, cp.async; sm_80
// and later), also the tensor-core decode. One work item per CTA: a tile of packed
// query rows (the query rows of a KV head's group, token-major) against a KV chunk,
// in key tiles of 64 (16 for the one-warp tile). Each warp owns 16 * kMmaM rows;
// S = Q K^T and O += P V accumulate in fp32 registers, P is reused from the S
// accumulators as the A operand. Q, K and V tiles sit in shared memory with 16-byte
// chunks XOR-swizzled by row so that ldmatrix is free of bank conflicts; the next K/V
// tile streams in (cp.async) while the current one is computed. fp8 KV lands in a
// staging buffer and is converted (exactly) to the query's type; RoPE rotates Q once
// and each K tile in shared memory. Per-element masking runs only on tiles the mask
// classifies as partial. The kernel is issue-bound (docs/kernels.md, "Tensor-core tile"), so every
// pass that a tile may not need sits behind a uniform branch. Included by
// prefill_launch.cuh and the Hopper mainloop, which shares its helpers.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "core/mask_policy.hpp"
#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/item_warps.cuh"
#include "cuda/attention/key_access.cuh"
#include "cuda/attention/math.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

// A CTA of kWarps warps, each owning 16 * kMmaM query rows of the tile.
template <int DQK, int DVO, int kWarps, int kMmaM>
struct PrefillShape {
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRowsPerWarp = 16 * kMmaM;
  static constexpr int kTileRows = kWarps * kRowsPerWarp;
  // Keys per tile. The one-warp (decode) tile is memory-bound: 16-key tiles (20 KiB
  // of shared memory, 199 registers) let 8 CTAs share an SM where 32-key tiles (37
  // KiB) let 6, so a batch's items fit in one wave more often (H200: 128 x 2k decode
  // 0.81 -> 0.96, fp8 KV 1.4x faster; docs/kernels.md, "Tensor-core tile"). Registers cap it at 8:
  // one-warp CTAs spread over the SM's four sub-partitions, whose 16K registers each
  // hold two such warps.
  static constexpr int kKeys = kWarps == 1 ? 16 : 64;
  static constexpr int kQkSteps = DQK / 16;    // k-steps of S = Q K^T
  static constexpr int kKeyFrags = kKeys / 8;  // n8 fragments of S
  static constexpr int kVoFrags = DVO / 8;     // n8 fragments of O
  static_assert(DQK % 64 == 0 && DVO % 64 == 0, "head dims are multiples of 64 (whole swizzle groups)");
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

// The 16-byte chunk `chunk` of row `row` of a tile with D 16-bit elements per row:
// chunks are XOR-swizzled within groups of 8 so that the 8 rows an ldmatrix phase
// reads at one logical chunk fall in 8 distinct bank groups.
template <int D>
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) {
  return row * (D / 8) + (chunk ^ (row & 7));
}

// Tile layouts: the byte offset of 16-byte chunk c of row `row` in a tile of kRows
// rows of D 16-bit elements, and kRowBytes, the offset of row + 8 from row (the
// swizzle repeats every 8 rows). SwizzledRows keeps rows whole (ldmatrix operands);
// SwizzledPanels splits them into 64-element panels of 128-byte rows in the 128-byte
// swizzle that wgmma's shared operands take (common/wgmma.cuh).
template <int D, int kRows>
struct SwizzledRows {
  static constexpr int kRowBytes = D * 2;
  __device__ __forceinline__ static int offset(int row, int c) { return swizzled_chunk<D>(row, c) * 16; }
};
template <int D, int kRows>
struct SwizzledPanels {
  static constexpr int kRowBytes = 128;
  static constexpr int kPanelBytes = kRows * 128;
  __device__ __forceinline__ static int offset(int row, int c) {
    return (c / 8) * kPanelBytes + row * 128 + ((c & 7) ^ (row & 7)) * 16;
  }
};

// A lane's ldmatrix addresses in a swizzled tile of D 16-bit elements per row. The
// lane reads rows lane_row + R (R a multiple of 8, so row & 7 is the lane's) at
// chunks c + b (c even, b the lane's 0/1). With the tile 128-byte aligned and rows
// a multiple of 128 bytes, bits 4-6 of the lane's address hold its swizzle
// (row & 7) ^ b, so chunk c + b sits at (base ^ 16 (c & 7)) + 16 (c & ~7) + R row
// bytes: one XOR per distinct c & 7, and the rest folds into ldmatrix's immediate.
template <int D>
struct SwizzledLane {
  unsigned base;  // shared address of the lane's row, bits 4-6 = its swizzle
  __device__ __forceinline__ SwizzledLane(const unsigned char* tile, int lane_row, int b)
      : base(static_cast<unsigned>(__cvta_generic_to_shared(tile)) + unsigned(lane_row * D * 2) +
             unsigned(16 * ((lane_row & 7) ^ b))) {}
  __device__ __forceinline__ unsigned at(int rows, int c, unsigned offset = 0) const {
    return ((base + offset) ^ unsigned(16 * (c & 7))) + unsigned(16 * (c & ~7) + rows * D * 2);
  }
};

// Packed row i of a work item: packed row row_begin + i is token
// (row_begin + i) / group of the request, qo head kv_head * group + (row_begin + i) % group.
struct PackedRow {
  std::int64_t token, head;
};
__device__ __forceinline__ PackedRow packed_row(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                int group, int i) {
  std::uint32_t in_group;
  const std::int64_t tok = p.group_div.divmod(std::uint32_t(item.row_begin + i), &in_group);
  return {tok, std::int64_t(item.kv_head * group + in_group)};
}

// Address of packed row i of a work item's q tile (16-bit q).
__device__ __forceinline__ const char* packed_q_row(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                    const detail::RequestInfo& r, int group, int i) {
  const PackedRow row = packed_row(p, item, group, i);
  return static_cast<const char*>(p.q) + ((r.qo_begin + row.token) * p.q_stride_n + row.head * p.q_stride_h) * 2;
}

// What a work item attends: its request's mask (custom bits only where the kernel
// applies them), the keys any of its rows can see within its chunk, [key_begin,
// key_end) (empty when end <= begin), and those all of them see, [full_lo, full_end)
// (none under custom bits): a key tile inside the latter needs no per-element mask,
// two compares instead of classifying the rows' bounds for every tile.
// The thread's index among the threads that share a tile, and their barrier: the
// CTA's, except in the item-warp instance of the one-warp (decode) tile, whose CTA
// holds several warps that each run a tile of their own (item_warps.cuh): there the
// lane, and the warp's own barrier, __syncwarp. Not a named barrier per warp
// (bar.sync 1 + warp, 32), which the fp8 tile had (2.7% faster at fp8 16 x 8k, 2%
// slower at 1 x 32k): compute-sanitizer's racecheck does not follow it, and reports
// the CTA merge's reads, after __syncthreads, as racing with the warps' state stores
// before it (docs/log/performance-2026-11-30.md, session 14, "racecheck and the fp8 tile's barrier").
template <bool kItemWarps>
__device__ __forceinline__ int tile_thread() {
  return kItemWarps ? int(threadIdx.x) % 32 : int(threadIdx.x);
}
template <bool kItemWarps>
__device__ __forceinline__ void tile_sync() {
  if constexpr (kItemWarps) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

struct ItemKeys {
  detail::RequestMask mask;
  int key_begin, key_end;
  int full_lo, full_end;
  int step = 0;  // keys from one of this warp's tiles to its next (keep_warp_turns); 0: back to back
  __device__ __forceinline__ int tile_step(int keys_per_tile) const { return step > 0 ? step : keys_per_tile; }
  __device__ __forceinline__ int num_tiles(int keys_per_tile) const {
    const int s = tile_step(keys_per_tile);
    return key_end > key_begin ? (key_end - key_begin + s - 1) / s : 0;
  }
  __device__ __forceinline__ bool needs_mask(int key0, int keys_per_tile) const {
    return key0 < full_lo || key0 + keys_per_tile > full_end;
  }
  // Warp w of `warps` (item warps): tiles w, w + warps, w + 2 warps, ... of the keys, so
  // that the CTA's warps copy neighbouring tiles at about the same time (one stream of
  // requests per CTA rather than one per warp); a warp past the last tile gets none.
  __device__ __forceinline__ void keep_warp_turns(int w, int warps, int keys_per_tile) {
    const int tiles = num_tiles(keys_per_tile);
    step = warps * keys_per_tile;
    key_begin = w < tiles ? key_begin + w * keys_per_tile : key_end;
  }
};
__device__ __forceinline__ ItemKeys item_keys(const AttentionKernelParams& p, const detail::WorkItem& item,
                                              const detail::RequestInfo& r, const std::uint8_t* custom) {
  ItemKeys k;
  k.mask.causal = p.causal;
  k.mask.window_left = p.window_left;
  k.mask.custom = custom;
  k.mask.qo_len = r.qo_len;
  k.mask.kv_len = r.kv_len;
  const int tok_lo = item.row_begin / p.group_size;  // the item's first and last tokens
  const int tok_hi = (item.row_end - 1) / p.group_size;
  k.key_begin = max(item.kv_begin, k.mask.first_key(tok_lo));
  k.key_end = min(item.kv_end, k.mask.last_key(tok_hi));
  k.mask.common_keys(tok_lo, tok_hi + 1, &k.full_lo, &k.full_end);
  k.full_end = custom != nullptr ? k.full_lo : min(k.full_end, k.key_end);
  return k;
}

// The keys of an item as far as the item alone tells (before its request's entry
// arrives): its chunk, which the planner clipped to the keys the request's rows see,
// so exactly item_keys' range where the item holds every row of its request (the
// decode tiles' items); with item warps, this warp's share. Masks are not set.
template <bool kItemWarps>
__device__ __forceinline__ ItemKeys item_keys_ahead(const detail::WorkItem& item, int keys_per_tile) {
  ItemKeys k{};
  k.key_begin = item.kv_begin;
  k.key_end = item.kv_end;
  k.full_lo = k.key_begin;
  k.full_end = k.key_end;
  if constexpr (kItemWarps) k.keep_warp_turns(int(threadIdx.x) / 32, int(blockDim.x) / 32, keys_per_tile);
  return k;
}

// Copies kRows rows of D 16-bit elements into a swizzled tile; rows >= valid are zeros.
// (kItemWarps: the copying threads are a warp of an item-warp CTA; tile_thread.)
template <int kThreads, int kRows, int D, template <int, int> class Layout = SwizzledRows, bool kItemWarps = false,
          class RowPtr>
__device__ __forceinline__ void load_tile16(unsigned char* tile, const RowPtr& row_ptr, int valid) {
  constexpr int kChunks = D / 8;
  static_assert(kRows * kChunks % kThreads == 0);
#pragma unroll
  for (int it = 0; it < kRows * kChunks / kThreads; ++it) {
    const int idx = it * kThreads + tile_thread<kItemWarps>();
    const int row = idx / kChunks, c = idx % kChunks;
    const bool ok = row < valid;
    const char* src = row_ptr(ok ? row : 0) + c * 16;
    ptx::cp_async_or_zero<16>(tile + Layout<D, kRows>::offset(row, c), src, ok);
  }
}

// Issues the copies of key rows [key0, key0 + kKeys) of one KV tensor (rows >= valid
// zero-filled, so that masked keys never multiply garbage: 0 * NaN would poison O),
// and of the other tensor's same rows when kAlsoV (one page-table lookup serves
// both). 16-bit KV goes to the swizzled compute tiles in 16-byte chunks; fp8 to the
// raw staging tile (rows of D bytes) in 8-byte chunks, the alignment fp8 rows are
// guaranteed. A one-warp CTA passes the rows' pages, looked up a tile ahead.
template <class TKV, int kThreads, int kKeys, int D, bool kPaged, bool kAlsoV, bool kItemWarps>
__device__ __forceinline__ void copy_key_rows(unsigned char* tile, unsigned char* v_tile, const KeyLocator& locate,
                                              const KeyRow& key_row, const KeyRow& v_row, int key0, int valid,
                                              const PagesAhead<kKeys>* ahead) {
  constexpr bool kRaw = sizeof(TKV) == 1;
  constexpr int kUnitBytes = kRaw ? 8 : 16;  // 8 elements either way
  constexpr int kUnits = D / 8;
  using Lay = SwizzledRows<D, kKeys>;
  static_assert(kKeys * kUnits % kThreads == 0);
  // A thread copies unit c of rows row0 + it * step: when step is a multiple of 8 its
  // swizzled unit is the same in every row, so destinations are one base plus
  // immediates (nothing for the compiler to keep per row).
  constexpr bool kFixedUnit = kThreads % kUnits == 0 && (kThreads / kUnits) % 8 == 0;
  // A one-warp tile whose rows all lie on one page (its first slot leaves room for
  // kKeys rows: pages of a multiple of kKeys keys and tiles that start on a page
  // boundary, as in decode): one page id and one address per tensor for the tile, then
  // the rows' strides, instead of a page id by shuffle, a division and 64-bit products
  // for every row (a third of the decode tile's instructions per tile otherwise).
  if constexpr (kPaged && kThreads == 32 && kThreads % kUnits == 0) {  // whole rows per copy step
    std::uint32_t slot0;
    locate.page_size.divmod(std::uint32_t(key0), &slot0);
    if (slot0 + kKeys <= locate.page_size.divisor) {
      const KeySlot first{ahead->tile_page(), std::int64_t(slot0)};
      const int r0 = tile_thread<kItemWarps>() / kUnits, c = tile_thread<kItemWarps>() % kUnits;
      constexpr int kRowsPerStep = kThreads / kUnits;
      const char* k_src = key_row(first) + r0 * key_row.stride_token + c * kUnitBytes;
      const char* v_src = kAlsoV ? v_row(first) + r0 * v_row.stride_token + c * kUnitBytes : nullptr;
#pragma unroll
      for (int it = 0; it < kKeys / kRowsPerStep; ++it) {
        const int row = it * kRowsPerStep + r0;
        const bool ok = row < valid;
        const int offset = kFixedUnit ? Lay::offset(r0, c) + it * kRowsPerStep * Lay::kRowBytes : Lay::offset(row, c);
        const auto dst = [&](unsigned char* t) { return kRaw ? t + row * D + c * 8 : t + offset; };
        ptx::cp_async_or_zero<kUnitBytes>(dst(tile), k_src + it * kRowsPerStep * key_row.stride_token, ok);
        if constexpr (kAlsoV) {
          ptx::cp_async_or_zero<kUnitBytes>(dst(v_tile), v_src + it * kRowsPerStep * v_row.stride_token, ok);
        }
      }
      return;
    }
  }
#pragma unroll
  for (int it = 0; it < kKeys * kUnits / kThreads; ++it) {
    const int idx = it * kThreads + tile_thread<kItemWarps>();
    const int row = idx / kUnits, c = idx % kUnits;
    const bool ok = row < valid;
    const int key = key0 + (ok ? row : 0);
    KeySlot at{0, key};
    if constexpr (kPaged) {
      if constexpr (kThreads == 32) {
        at = ahead->slot(locate, key, ok ? row : 0);
      } else {
        at = locate(key);
      }
    }
    const int offset = kFixedUnit ? Lay::offset(tile_thread<kItemWarps>() / kUnits, c) + it * (kThreads / kUnits) * Lay::kRowBytes
                                  : Lay::offset(row, c);
    const auto dst = [&](unsigned char* t) { return kRaw ? t + row * D + c * 8 : t + offset; };
    ptx::cp_async_or_zero<kUnitBytes>(dst(tile), key_row(at) + c * kUnitBytes, ok);
    if constexpr (kAlsoV) ptx::cp_async_or_zero<kUnitBytes>(dst(v_tile), v_row(at) + c * kUnitBytes, ok);
  }
}

// The copies of one KV tile: K rows into k_dst and V rows into v_dst (for fp8, the
// staging tile holds K rows of DQK bytes, then V rows of DVO bytes).
template <class TKV, int kThreads, int kKeys, int DQK, int DVO, bool kItemWarps = false>
__device__ __forceinline__ void load_kv_tile(unsigned char* k_dst, unsigned char* v_dst, const KeyLocator& locate,
                                             const KeyRow& k_row, const KeyRow& v_row, int key0, int valid,
                                             const PagesAhead<kKeys>* ahead) {
  const auto copy_kv = [&](auto paged) {
    constexpr bool kPaged = decltype(paged)::value;
    if constexpr (DQK == DVO) {
      copy_key_rows<TKV, kThreads, kKeys, DQK, kPaged, true, kItemWarps>(k_dst, v_dst, locate, k_row, v_row, key0, valid, ahead);
    } else {
      copy_key_rows<TKV, kThreads, kKeys, DQK, kPaged, false, kItemWarps>(k_dst, nullptr, locate, k_row, k_row, key0, valid, ahead);
      copy_key_rows<TKV, kThreads, kKeys, DVO, kPaged, false, kItemWarps>(v_dst, nullptr, locate, v_row, v_row, key0, valid, ahead);
    }
  };
  if (locate.pages != nullptr) {
    copy_kv(std::true_type{});
  } else {
    copy_kv(std::false_type{});
  }
}

// 8 elements of a 16-byte chunk as float, and back.
template <class T>
__device__ __forceinline__ void chunk_to_float(const uint4& raw, float (&f)[8]) {
  const auto* h = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_float(h[i]);
}
template <class T>
__device__ __forceinline__ uint4 float_to_chunk(const float (&f)[8]) {
  uint4 raw;
  auto* w = reinterpret_cast<std::uint32_t*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = mma::pack2<T>(f[2 * i], f[2 * i + 1]);
  return raw;
}
// 8 fp8 elements (8 bytes) as float (exact).
template <class TKV>
__device__ __forceinline__ void fp8_to_float(const uint2& raw, float (&f)[8]) {
  Vec8<TKV> v;
  v.raw = raw;
  v.to_float(f);
}

// Rotate-half RoPE of one 8-element chunk pair: x holds dims [8c, 8c + 8), y the
// dims D/2 further; freq[d] is the inverse frequency of dim d < D/2.
__device__ __forceinline__ void rope_pair(float (&x)[8], float (&y)[8], const float* freq, int c, float pos) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float s, co;
    sincosf(pos * freq[8 * c + i], &s, &co);
    const float x0 = x[i], y0 = y[i];
    x[i] = x0 * co - y0 * s;
    y[i] = y0 * co + x0 * s;
  }
}

// Reduces N values pairwise (depth log2 N instead of a chain of N dependent
// operations: the row max and sum are on the critical path of every tile).
template <int N, class Op>
__device__ __forceinline__ float tree_reduce(float (&x)[N], Op op) {
  static_assert((N & (N - 1)) == 0, "a power of two");
#pragma unroll
  for (int stride = N / 2; stride >= 1; stride /= 2) {
#pragma unroll
    for (int i = 0; i < stride; ++i) x[i] = op(x[i], x[i + stride]);
  }
  return x[0];
}

// Hides the scores of keys a row may not see (per element: for tiles the mask
// classifies as partial). s holds a warp's kMmaM m16 tiles of kKeyFrags n8 fragments;
// tok[m][h] is the token of this thread's row g + 8h of m16 tile m.
template <bool kGeneral, int kMmaM, int kKeyFrags>
__device__ __forceinline__ void mask_scores(float (&s)[kMmaM][kKeyFrags][4], const detail::RequestMask& mask,
                                            const int (&tok)[kMmaM][2], int key0, int key_end, int lane) {
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
    // The row's visible keys of this tile (before the custom mask) as columns [lo, hi).
    int lo[2], hi[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      lo[h] = mask.first_key(tok[m][h]) - key0;
      hi[h] = min(mask.last_key(tok[m][h]), key_end) - key0;
    }
#pragma unroll
    for (int n = 0; n < kKeyFrags; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2, col = 8 * n + 2 * (lane % 4) + e % 2;
        const bool hidden = col < lo[h] || col >= hi[h] ||
                            (kGeneral && mask.custom && !mask.custom_bit(tok[m][h], key0 + col));
        if (hidden) s[m][n][e] = -INFINITY;
      }
  }
}

// Online softmax of one key tile in base 2: turns the scores s (scaled by sc in the
// exponent) into probabilities against the updated running row maxima, folds their
// sums into row_sum, and gives the factor by which each row's O must be rescaled.
// A row lives in the 4 lanes of a quad. Returns whether any rescale of the warp
// differs from 1 (exactly 1 when a row's maximum did not move).
template <int kMmaM, int kKeyFrags>
__device__ __forceinline__ bool online_softmax(float (&s)[kMmaM][kKeyFrags][4], float (&row_max)[kMmaM][2],
                                               float (&row_sum)[kMmaM][2], float (&rescale)[kMmaM][2], float sc) {
  bool changed = false;
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float part[kKeyFrags];
#pragma unroll
      for (int n = 0; n < kKeyFrags; ++n) part[n] = fmaxf(s[m][n][2 * h], s[m][n][2 * h + 1]);
      float mx = tree_reduce(part, [](float x, float y) { return fmaxf(x, y); });
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(row_max[m][h], mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // all masked so far: keep zeros, no NaN
      const float m_scaled = m_use * sc;
      // Exactly 1 when the maximum did not move (the skipped multiplies rely on it).
      rescale[m][h] = exp2_approx((row_max[m][h] - m_use) * sc);
      changed |= m_new != row_max[m][h];
      row_max[m][h] = m_new;
#pragma unroll
      for (int n = 0; n < kKeyFrags; ++n) {
        s[m][n][2 * h] = exp2_approx(fmaf(s[m][n][2 * h], sc, -m_scaled));
        s[m][n][2 * h + 1] = exp2_approx(fmaf(s[m][n][2 * h + 1], sc, -m_scaled));
        part[n] = s[m][n][2 * h] + s[m][n][2 * h + 1];
      }
      row_sum[m][h] = row_sum[m][h] * rescale[m][h] + tree_reduce(part, [](float x, float y) { return x + y; });
    }
  }
  // Once the running maxima settle (most tiles of a long row), the rescale is exactly
  // 1 for the whole warp and the caller skips the multiplies.
  return __any_sync(0xffffffffu, changed);
}

// O rows times their rescale factors.
template <int kMmaM, int kVoFrags>
__device__ __forceinline__ void rescale_rows(float (&o)[kMmaM][kVoFrags][4], const float (&rescale)[kMmaM][2]) {
#pragma unroll
  for (int m = 0; m < kMmaM; ++m)
#pragma unroll
    for (int c = 0; c < kVoFrags; ++c) {
      o[m][c][0] *= rescale[m][0];
      o[m][c][1] *= rescale[m][0];
      o[m][c][2] *= rescale[m][1];
      o[m][c][3] *= rescale[m][1];
    }
}

// The A fragment of P for keys [16 j, 16 j + 16): the S accumulators of n8 blocks 2j
// and 2j + 1 (C layout) are exactly the m16n8k16 A layout once rounded to T.
template <class T, int kKeyFrags>
__device__ __forceinline__ void p_fragment(const float (&s)[kKeyFrags][4], int j, std::uint32_t (&a)[4]) {
  a[0] = mma::pack2<T>(s[2 * j][0], s[2 * j][1]);
  a[1] = mma::pack2<T>(s[2 * j][2], s[2 * j][3]);
  a[2] = mma::pack2<T>(s[2 * j + 1][0], s[2 * j + 1][1]);
  a[3] = mma::pack2<T>(s[2 * j + 1][2], s[2 * j + 1][3]);
}

// A row's sum over the quad of lanes that hold its accumulator columns.
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

// The base-2 LSE of packed row i of an unsplit item (the rows' maximum scaled by sc).
__device__ __forceinline__ void store_row_lse(const AttentionKernelParams& p, const detail::WorkItem& item,
                                              const detail::RequestInfo& r, int i, float row_max, float sc, float sum) {
  const auto [tk, head] = packed_row(p, item, p.group_size, i);
  const std::int64_t orow = r.qo_begin + tk;
  p.lse[orow * p.lse_stride_n + head * p.lse_stride_h] = sum > 0.0f ? row_max * sc + __log2f(sum) : -INFINITY;
}

// Writes kRows staged rows of O (16-bit, D elements, swizzled 16-byte chunks) starting
// at tile row first_row as whole 16-byte chunks, a row's head slice by consecutive
// threads; t is the thread's index among the kThreads that write.
template <class TO, int D, int kThreads, int kRows>
__device__ __forceinline__ void write_staged_rows(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                  const detail::RequestInfo& r, const unsigned char* stage,
                                                  int first_row, int rows, int t) {
  constexpr int kChunks = D / 8, kRowsPerPass = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0, "whole rows per pass");
  const int chunk = t % kChunks;
#pragma unroll
  for (int row = t / kChunks; row < kRows; row += kRowsPerPass) {
    const int i = first_row + row;
    if (i >= rows) break;  // rows are in order: the rest are past the item's end too
    const auto [tk, head] = packed_row(p, item, p.group_size, i);
    const std::int64_t orow = r.qo_begin + tk;
    const uint4 v = *reinterpret_cast<const uint4*>(stage + swizzled_chunk<D>(row, chunk) * 16);
    ptx::st_v4(static_cast<TO*>(p.o) + orow * p.o_stride_n + head * p.o_stride_h + chunk * 8, v);
  }
}

// Epilogue: normalises and writes this thread's rows of O (or the partial state of
// a split chunk) and LSE. Warp w owns tile rows [w * kRowsPerWarp, +kRowsPerWarp).
template <class TO, int DVO, int kRowsPerWarp, int kMmaM, int kVoFrags>
__device__ __forceinline__ void store_output(const AttentionKernelParams& p, const detail::WorkItem& item,
                                             const detail::RequestInfo& r, const float (&o)[kMmaM][kVoFrags][4],
                                             const float (&row_max)[kMmaM][2], const float (&row_sum)[kMmaM][2],
                                             float sc, int rows, int warp, int lane) {
  const bool split = r.num_chunks > 1;
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(row_sum[m][h]);
      const int i = warp * kRowsPerWarp + m * 16 + lane / 4 + 8 * h;
      if (i >= rows) continue;
      const auto [tk, head] = packed_row(p, item, p.group_size, i);
      const float norm = sum > 0.0f ? p.v_scale / sum : 0.0f;
      const float lse = sum > 0.0f ? row_max[m][h] * sc + __log2f(sum) : -INFINITY;
      if (split) {
        const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + tk;
        float* po = p.partial_o + (prow * p.num_qo_heads + head) * DVO + 2 * (lane % 4);
#pragma unroll
        for (int c = 0; c < kVoFrags; ++c) {
          *reinterpret_cast<float2*>(po + 8 * c) = make_float2(o[m][c][2 * h] * norm, o[m][c][2 * h + 1] * norm);
        }
        if (lane % 4 == 0) p.partial_lse[prow * p.num_qo_heads + head] = lse;
      } else {
        const std::int64_t orow = r.qo_begin + tk;
        TO* out = static_cast<TO*>(p.o) + orow * p.o_stride_n + head * p.o_stride_h + 2 * (lane % 4);
#pragma unroll
        for (int c = 0; c < kVoFrags; ++c) {
          *reinterpret_cast<std::uint32_t*>(out + 8 * c) = mma::pack2<TO>(o[m][c][2 * h] * norm, o[m][c][2 * h + 1] * norm);
        }
        if (lane % 4 == 0 && p.lse) p.lse[orow * p.lse_stride_n + head * p.lse_stride_h] = lse;
      }
    }
  }
}

// Epilogue of a whole (unsplit) item through shared memory: each warp normalises
// its rows of O, stages them in 16-bit in its own rows of the Q tile (free once its
// last S = Q K^T is done; rows of D 16-bit elements, 16-byte chunks swizzled by row)
// and writes them back as whole 16-byte chunks, a row's head slice by consecutive
// lanes (the accumulator layout writes 4 bytes per lane, 8 rows per store). LSE as
// in store_output. `stage` is the warp's first row of the Q tile.
template <class TO, int D, int kRowsPerWarp, int kMmaM, int kVoFrags>
__device__ __forceinline__ void store_output_warp_staged(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                         const detail::RequestInfo& r,
                                                         const float (&o)[kMmaM][kVoFrags][4],
                                                         const float (&row_max)[kMmaM][2],
                                                         const float (&row_sum)[kMmaM][2], float sc, int rows,
                                                         unsigned char* stage, int warp, int lane) {
  static_assert(kVoFrags == D / 8 && kRowsPerWarp == 16 * kMmaM);
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(row_sum[m][h]);
      const int row = m * 16 + lane / 4 + 8 * h;  // within the warp's rows
      const int i = warp * kRowsPerWarp + row;    // within the tile
      const float norm = sum > 0.0f ? p.v_scale / sum : 0.0f;
#pragma unroll
      for (int c = 0; c < kVoFrags; ++c) {
        *reinterpret_cast<std::uint32_t*>(stage + swizzled_chunk<D>(row, c) * 16 + 4 * (lane % 4)) =
            mma::pack2<TO>(o[m][c][2 * h] * norm, o[m][c][2 * h + 1] * norm);
      }
      if (lane % 4 == 0 && p.lse && i < rows) store_row_lse(p, item, r, i, row_max[m][h], sc, sum);
    }
  }
  __syncwarp();
  write_staged_rows<TO, D, 32, kRowsPerWarp>(p, item, r, stage, warp * kRowsPerWarp, rows, lane);
}

// Makes a 16-bit compute tile of kRows rows ready in place: converts it from the fp8
// staging tile (raw != null) and/or rotates it by RoPE (freq != null) at position
// pos(row). Each thread owns whole chunk pairs, so no barrier is needed inside.
template <class T, class TKV, int kThreads, int kRows, int D, bool kItemWarps = false, class Pos>
__device__ __forceinline__ void prepare_tile(unsigned char* tile, const unsigned char* raw, const float* freq, const Pos& pos) {
  constexpr int kHalf = D / 16;  // chunk pairs per row
  for (int idx = tile_thread<kItemWarps>(); idx < kRows * kHalf; idx += kThreads) {
    const int row = idx / kHalf, c = idx % kHalf;
    float x[8], y[8];
    uint4* px = reinterpret_cast<uint4*>(tile) + swizzled_chunk<D>(row, c);
    uint4* py = reinterpret_cast<uint4*>(tile) + swizzled_chunk<D>(row, c + kHalf);
    if constexpr (sizeof(TKV) == 1) {
      const auto* r = reinterpret_cast<const uint2*>(raw + row * D);
      fp8_to_float<TKV>(r[c], x);
      fp8_to_float<TKV>(r[c + kHalf], y);
    } else {
      chunk_to_float<T>(*px, x);
      chunk_to_float<T>(*py, y);
    }
    if (freq != nullptr) rope_pair(x, y, freq, c, pos(row));
    *px = float_to_chunk<T>(x);
    *py = float_to_chunk<T>(y);
  }
}

// Threads per CTA and resident CTAs asked of the register allocator: 2 CTAs of 128
// threads may use 255 registers per thread, and so may one of 256 threads or 8 one-warp
// CTAs (the decode tile: two warps per SM sub-partition, whichever count up to 255 it
// takes), or one CTA of 8 item warps of that tile (item_warps.cuh); narrow tiles (4
// warps of 16 rows) of head_dim <= 128 fit 3.
template <int kWarps, bool kItemWarps>
inline constexpr int kPrefillMaxThreads = (kItemWarps ? kMaxItemWarps : kWarps) * 32;
template <int DVO, int kWarps, int kMmaM, bool kItemWarps>
inline constexpr int kPrefillMinBlocks =
    kItemWarps ? 1 : kWarps == 1 ? 8 : kWarps == 8 ? 1 : (kMmaM == 2 || DVO > 128 ? 2 : 3);

// kGeneral adds the custom mask, ALiBi and the soft cap to the logits; without it
// (the common case) those registers are free for the accumulators. kItemWarps: the
// one-warp tile's instance whose CTA runs one item on blockDim.x / 32 warps
// (item_warps.cuh); the plain instance is the code it was before item warps.
template <class TQ, class TKV, class TO, int DQK, int DVO, int kWarps, int kMmaM, bool kGeneral, bool kItemWarps>
__global__ void __launch_bounds__(kPrefillMaxThreads<kWarps, kItemWarps>,
                                  kPrefillMinBlocks<DVO, kWarps, kMmaM, kItemWarps>)
    prefill_kernel(const __grid_constant__ AttentionKernelParams p) {
  static_assert(!kItemWarps || (kWarps == 1 && kMmaM == 1 && !kGeneral), "item warps: the one-warp tile");
  using S = PrefillShape<DQK, DVO, kWarps, kMmaM>;
  using L = PrefillSmem<TKV, DQK, DVO, kWarps, kMmaM>;
  using T = TQ;  // the mma operand type; KV is converted to it
  constexpr int kThreads = S::kThreads, kKeys = S::kKeys, kRowsPerWarp = S::kRowsPerWarp;
  extern __shared__ __align__(128) unsigned char smem_cta[];
  // The one-warp (decode) tile takes the items in the plan's order and learns from
  // its own entry whether it has one (unused_item): one dependent load fewer before
  // its first copies than reading the count first. Its items are alike (every row of
  // a request). The planner lists a request's row tiles in order, so under a causal
  // mask the heaviest come last: larger tiles start from the end so that those do
  // not form the tail.
  constexpr bool kOneWarp = kThreads == 32;
  detail::WorkItem item;
  if constexpr (kOneWarp) {
    item = load_work_item(p.items + blockIdx.x);
    if (unused_item(item)) return;  // grid sized for the capacity
  } else {
    const int num_items = p.counts[0];
    if (int(blockIdx.x) >= num_items) return;
    item = p.items[num_items - 1 - int(blockIdx.x)];
  }
  const KeyLocator locate = item_locator(p, item);
  const detail::RequestInfo r = p.requests[item.request];
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
  // Warps of a larger tile split its rows; the one-warp tile's CTA holds item_warps
  // warps (item_warps.cuh), each a tile of its own over its share of the keys.
  const int lane = int(threadIdx.x) % 32, warp = kItemWarps ? 0 : int(threadIdx.x) / 32;
  unsigned char* smem = kItemWarps ? smem_cta + int(threadIdx.x) / 32 * L::kTileBytes : smem_cta;
  const int rows = item.row_end - item.row_begin;
  const int group = p.group_size;

  ItemKeys keys = item_keys(p, item, r, kGeneral && p.custom_mask ? p.custom_mask + r.mask_offset : nullptr);
  if constexpr (kItemWarps) keys.keep_warp_turns(int(threadIdx.x) / 32, int(blockDim.x) / 32, kKeys);
  const detail::RequestMask& mask = keys.mask;
  const int key_begin = keys.key_begin, key_end = keys.key_end;
  const int num_tiles = keys.num_tiles(kKeys);
  const int step = kItemWarps ? keys.tile_step(kKeys) : kKeys;  // tile t: key_begin + t * step

  // The swizzled addressing (SwizzledLane) needs 128-byte aligned tiles.
  if ((static_cast<unsigned>(__cvta_generic_to_shared(smem)) & 127u) != 0) __trap();
  unsigned char* sq = smem + L::q;
  float* freq = reinterpret_cast<float*>(smem + L::freq);

  const auto q_row = [&](int i) { return packed_q_row(p, item, r, group, i); };
  load_tile16<kThreads, S::kTileRows, DQK, SwizzledRows, kItemWarps>(sq, q_row, rows);

  const std::int64_t elem = sizeof(TKV);
  const ItemRows kv_rows = item_rows(p, item, elem);
  const KeyRow k_row = kv_rows.k, v_row = kv_rows.v;
  // Tile t lands in stage t % 2 (compute tiles for 16-bit KV, staging tiles for fp8).
  const auto load_kv = [&](int t) {
    const int key0 = key_begin + t * step, stage = t & 1;
    const PagesAhead<kKeys>* pages = kThreads == 32 ? &ahead : nullptr;
    if constexpr (L::kStaged) {
      unsigned char* raw = smem + L::raw + stage * L::raw_stage;
      load_kv_tile<TKV, kThreads, kKeys, DQK, DVO, kItemWarps>(raw, raw + kKeys * DQK, locate, k_row, v_row, key0, key_end - key0,
                                                   pages);
    } else {
      load_kv_tile<TKV, kThreads, kKeys, DQK, DVO, kItemWarps>(smem + L::k + stage * L::k_stage, smem + L::v + stage * L::v_stage,
                                                   locate, k_row, v_row, key0, key_end - key0, pages);
    }
  };
  if (num_tiles > 0) {
    if constexpr (kOneWarp) {
      if (key_begin != guess.key_begin || key_end != guess.key_end) ahead.start(locate, key_begin, step, key_end);
    }
    load_kv(0);
    if constexpr (kThreads == 32) {
      if (num_tiles > 1) ahead.fetch(locate, key_begin + step, key_end);
    }
  }
  ptx::cp_async_commit();

  const bool rope = p.rope;
  if (rope) {
    for (int d = tile_thread<kItemWarps>(); d < DQK / 2; d += kThreads) {
      freq[d] = p.rope_rcp_scale * powf(p.rope_rcp_theta, float(2 * d) / float(DQK));
    }
  }

  // This thread's rows: fragment row g (h = 0) and g + 8 (h = 1) of each m16 tile.
  int tok[kMmaM][2];
  float slope[kMmaM][2];
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = min(warp * kRowsPerWarp + m * 16 + lane / 4 + 8 * h, rows - 1);
      std::uint32_t in_group;
      tok[m][h] = int(p.group_div.divmod(std::uint32_t(item.row_begin + i), &in_group));
      slope[m][h] = kGeneral && p.alibi_slopes ? __ldg(p.alibi_slopes + item.kv_head * group + in_group) : 0.0f;
    }
  }
  const bool fast_logits = !kGeneral || (p.alibi_slopes == nullptr && p.logits_soft_cap <= 0.0f);
  // Scores stay raw in the fast path and the base-2 scale is folded into the
  // exponent (one FFMA per element); a negative scale (negative k_scale) would turn
  // the max into a min, so those scores are scaled first like the general path's.
  const bool prescale = !fast_logits || p.sm_scale_log2 < 0.0f;
  const float sc = prescale ? 1.0f : p.sm_scale_log2;

  // ldmatrix lanes: Q as the A operand (rows lane % 16, k-chunk + lane / 16), K as the
  // B operand of S (keys lane % 8 + 8 (lane / 16), k-chunk + (lane / 8) % 2), V as the
  // transposed B operand of O (keys lane % 8 + 8 ((lane / 8) % 2), d-chunk + lane / 16).
  const SwizzledLane<DQK> q_lane(sq, warp * kRowsPerWarp + lane % 16, lane / 16);
  const SwizzledLane<DQK> k_lane(smem + L::k, lane % 8 + (lane / 16) * 8, (lane / 8) % 2);
  const SwizzledLane<DVO> v_lane(smem + L::v, lane % 8 + ((lane / 8) % 2) * 8, lane / 16);

  float o[kMmaM][S::kVoFrags][4];
  float row_max[kMmaM][2], row_sum[kMmaM][2];
#pragma unroll
  for (int m = 0; m < kMmaM; ++m) {
#pragma unroll
    for (int c = 0; c < S::kVoFrags; ++c) o[m][c][0] = o[m][c][1] = o[m][c][2] = o[m][c][3] = 0.0f;
    row_max[m][0] = row_max[m][1] = -INFINITY;
    row_sum[m][0] = row_sum[m][1] = 0.0f;
  }

  for (int t = 0; t < num_tiles; ++t) {
    const int key0 = key_begin + t * step;
    const int stage = t & 1;
    // The next tile streams in while this one is computed (its stage was released by
    // the barrier that ended the previous iteration).
    if (t + 1 < num_tiles) load_kv(t + 1);
    if constexpr (kThreads == 32) {
      if (t + 2 < num_tiles) ahead.fetch(locate, key0 + 2 * step, key_end);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait_group<1>();
    tile_sync<kItemWarps>();
    if (L::kStaged || rope) {
      if (t == 0 && rope) {
        prepare_tile<T, T, kThreads, S::kTileRows, DQK, kItemWarps>(sq, nullptr, freq, [&](int i) {
          const int packed = item.row_begin + min(i, rows - 1);
          return float(mask.diagonal(packed / group));
        });
      }
      const unsigned char* raw = smem + L::raw + stage * L::raw_stage;
      unsigned char* k_tile = smem + L::k + (L::kStaged ? 0 : stage * L::k_stage);
      prepare_tile<T, TKV, kThreads, kKeys, DQK, kItemWarps>(k_tile, raw, rope ? freq : nullptr, [&](int i) { return float(key0 + i); });
      if constexpr (L::kStaged) {
        prepare_tile<T, TKV, kThreads, kKeys, DVO, kItemWarps>(smem + L::v, raw + kKeys * DQK, nullptr, [](int) { return 0.0f; });
      }
      tile_sync<kItemWarps>();
    }
    const unsigned k_off = L::kStaged ? 0u : unsigned(stage * L::k_stage);
    const unsigned v_off = L::kStaged ? 0u : unsigned(stage * L::v_stage);

    // S = Q K^T for this warp's rows.
    float s[kMmaM][S::kKeyFrags][4];
#pragma unroll
    for (int m = 0; m < kMmaM; ++m)
#pragma unroll
      for (int n = 0; n < S::kKeyFrags; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < S::kQkSteps; ++kk) {
      std::uint32_t a[kMmaM][4];
#pragma unroll
      for (int m = 0; m < kMmaM; ++m) mma::ldmatrix_x4(a[m], q_lane.at(m * 16, 2 * kk));
#pragma unroll
      for (int np = 0; np < kKeys / 16; ++np) {
        std::uint32_t b[4];
        mma::ldmatrix_x4(b, k_lane.at(16 * np, 2 * kk, k_off));
#pragma unroll
        for (int m = 0; m < kMmaM; ++m) {
          mma::m16n8k16<T>(s[m][2 * np], a[m], b[0], b[1]);
          mma::m16n8k16<T>(s[m][2 * np + 1], a[m], b[2], b[3]);
        }
      }
    }

    // Logits, then the mask where the tile needs it. Each pass is one uniform branch
    // around whole loops, so tiles that skip it issue none of its instructions.
    if (kGeneral && !fast_logits) {
#pragma unroll
      for (int m = 0; m < kMmaM; ++m)
#pragma unroll
        for (int n = 0; n < S::kKeyFrags; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e / 2, col = 8 * n + 2 * (lane % 4) + e % 2;
            float x = s[m][n][e] * p.sm_scale;
            if (p.alibi_slopes) x += slope[m][h] * float(key0 + col - mask.diagonal(tok[m][h]));
            if (p.logits_soft_cap > 0.0f) x = p.logits_soft_cap * tanhf(x / p.logits_soft_cap);
            s[m][n][e] = x * kLog2e;
          }
    } else if (prescale) {
#pragma unroll
      for (int m = 0; m < kMmaM; ++m)
#pragma unroll
        for (int n = 0; n < S::kKeyFrags; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[m][n][e] *= p.sm_scale_log2;
    }
    if (keys.needs_mask(key0, kKeys)) {
      mask_scores<kGeneral>(s, mask, tok, key0, key_end, lane);
    }

    float rescale[kMmaM][2];
    if (online_softmax(s, row_max, row_sum, rescale, sc)) rescale_rows(o, rescale);

    // O += P V, P taken from the S accumulators as A fragments.
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j) {
      std::uint32_t pa[kMmaM][4];
#pragma unroll
      for (int m = 0; m < kMmaM; ++m) p_fragment<T>(s[m], j, pa[m]);
#pragma unroll
      for (int c = 0; c < S::kVoFrags; c += 2) {
        std::uint32_t b[4];
        mma::ldmatrix_x4_trans(b, v_lane.at(16 * j, c, v_off));
#pragma unroll
        for (int m = 0; m < kMmaM; ++m) {
          mma::m16n8k16<T>(o[m][c], pa[m], b[0], b[1]);
          mma::m16n8k16<T>(o[m][c + 1], pa[m], b[2], b[3]);
        }
      }
    }
    tile_sync<kItemWarps>();  // every warp is done with this stage before it is refilled
  }

  if constexpr (kItemWarps) {  // the CTA's warps merge their states (item_warps.cuh)
    static_assert(L::bytes - L::k >= kWarpStateBytes<DVO>, "a warp's state fits in its K/V stages");
    ptx::cp_async_wait_all();  // no copy still lands in the stages the state reuses
    tile_sync<kItemWarps>();
    stash_warp_state<DVO>(p, o, row_max, row_sum, sc, lane, smem + L::k);
    merge_item_warps<TO, DVO>(
        p, item, r, rows, [&](int w) { return smem_cta + w * L::kTileBytes + L::k; },
        [&](int i) { return packed_row(p, item, group, i); });
    return;
  }
  if (r.num_chunks > 1 || DQK != DVO) {
    store_output<TO, DVO, kRowsPerWarp>(p, item, r, o, row_max, row_sum, sc, rows, warp, lane);
  } else {
    // An item without keys never waited for its Q tile, whose rows (copied by any
    // thread) the epilogue reuses: the copies land and the barrier orders them first.
    if (num_tiles == 0) {
      ptx::cp_async_wait_all();
      tile_sync<kItemWarps>();
    }
    store_output_warp_staged<TO, DVO, kRowsPerWarp>(p, item, r, o, row_max, row_sum, sc, rows,
                                                    sq + warp * kRowsPerWarp * DQK * 2, warp, lane);
  }
}

template <class TQ, class TKV, class TO, int DQK, int DVO, int kWarps, int kMmaM, bool kGeneral,
          bool kItemWarps_ = false>
struct PrefillKernel {
  static constexpr int kThreads = kWarps * 32;  // of one tile (of one item warp with kItemWarps)
  static constexpr int kSmem = PrefillSmem<TKV, DQK, DVO, kWarps, kMmaM>::bytes;
  static constexpr auto kernel = prefill_kernel<TQ, TKV, TO, DQK, DVO, kWarps, kMmaM, kGeneral, kItemWarps_>;
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
