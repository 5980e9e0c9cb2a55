// SPDX-License-Identifier: Apache-2.0
// The wgmma mainloop's tile shape, its shared-memory layout (Q, then the stages of K,
// then those of V, in wgmma's 128-byte swizzle) and the copies of an item's K and V
// tiles into their stages. Included by its kernel.cuh.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/item_keys.cuh"
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

// A key row's place in the paged cache: its page id and its slot in the page, both
// found once per tile (the divmod is shared by the row's K and V copies).
struct HopperRowPlace {
  std::int32_t page, slot;
};

// The copies of an item's K and V tiles: tile t (keys key_begin + 64 t) lands in
// stage t % kStages of K and of V, K's copies one tile ahead of V's. Four threads copy
// each key row of a tile (a thread owns one row, so it looks the row up once per
// tile): thread q of the four copies chunks q + 4 j, so that for each j the four read
// 64 contiguous bytes. Chunk q + 4 j lands in panel j / 2 at swizzled chunk
// (q + 4 (j % 2)) ^ (row % 8) = that of j = 0 XOR 4 (j % 2).
// Paged KV: the page id of a tile's row is read one iteration before its K copies
// need it and kept for its V copies an iteration later, so no copy waits on a
// page-table read (a dependent L2 round trip would stall the warps that compute).
template <int D, bool kPaged>
struct HopperKvStages {
  using S = HopperPrefillShape<D>;
  static constexpr int kRowThreads = 4, kCopies = D / 8 / kRowThreads;
  static_assert(S::kThreads == kRowThreads * S::kKeys, "a thread per row quarter");
  const AttentionKernelParams& p;
  unsigned char* smem;
  int key_begin, key_end;
  int key_row, quarter, dst0;
  const std::int32_t* pages;
  const char *k_base, *v_base;
  std::int32_t k_page_bytes, k_token_bytes, v_page_bytes, v_token_bytes;
  HopperRowPlace k_page{0, 0}, v_page{0, 0};  // paged: places of the next K and V copies

  __device__ __forceinline__ HopperKvStages(const AttentionKernelParams& p_, const detail::WorkItem& item,
                                            const detail::RequestInfo& r, const ItemKeys& keys,
                                            unsigned char* smem_)
      : p(p_), smem(smem_), key_begin(keys.key_begin), key_end(keys.key_end) {
    key_row = int(threadIdx.x) / kRowThreads;
    quarter = int(threadIdx.x) % kRowThreads;
    dst0 = key_row * 128 + ((quarter ^ (key_row & 7)) * 16);
    pages = kPaged ? p.kv.pages.page_ids + r.kv_begin : nullptr;
    const std::int64_t ragged_offset = kPaged ? 0 : std::int64_t(r.kv_begin);
    k_base = static_cast<const char*>(p.kv.k.data) +
             (item.kv_head * p.kv.k.stride_head + ragged_offset * p.kv.k.stride_token) * 2 + quarter * 16;
    v_base = static_cast<const char*>(p.kv.v.data) +
             (item.kv_head * p.kv.v.stride_head + ragged_offset * p.kv.v.stride_token) * 2 + quarter * 16;
    // Byte strides fit 32 bits (the launch checks; 32 x 32 -> 64-bit products are one
    // instruction each).
    k_page_bytes = std::int32_t(p.kv.k.stride_page * 2),
    k_token_bytes = std::int32_t(p.kv.k.stride_token * 2);
    v_page_bytes = std::int32_t(p.kv.v.stride_page * 2),
    v_token_bytes = std::int32_t(p.kv.v.stride_token * 2);
  }

  __device__ __forceinline__ HopperRowPlace fetch_page(int t) const {
    if constexpr (kPaged) {
      const int key = min(key_begin + t * S::kKeys + key_row, key_end - 1);  // past the end: any valid row
      std::uint32_t slot;
      const std::uint32_t page_index = p.kv.pages.page_size.divmod(std::uint32_t(key), &slot);
      return {__ldg(pages + page_index), std::int32_t(slot)};
    } else {
      return {0, 0};
    }
  }
  __device__ __forceinline__ void copy_row(unsigned char* tile, const char* base, std::int32_t page_bytes,
                                           std::int32_t token_bytes, int t, HopperRowPlace place) const {
    const int key = key_begin + t * S::kKeys + key_row;
    const bool ok = key < key_end;
    const char* src;
    if constexpr (kPaged) {
      src = base + std::int64_t(place.page) * page_bytes + place.slot * token_bytes;
    } else {
      src = base + std::int64_t(ok ? key : key_begin) * token_bytes;
    }
#pragma unroll
    for (int j = 0; j < kCopies; ++j) {
      ptx::cp_async_or_zero<16>(tile + (j / 2) * (S::kKeys * 128) + (dst0 ^ (64 * (j % 2))), src + 64 * j, ok);
    }
  }
  __device__ __forceinline__ void load_k(int t, HopperRowPlace page) const {
    copy_row(smem + S::k + (t % S::kStages) * S::k_stage, k_base, k_page_bytes, k_token_bytes, t, page);
  }
  __device__ __forceinline__ void load_v(int t, HopperRowPlace page) const {
    copy_row(smem + S::v + (t % S::kStages) * S::v_stage, v_base, v_page_bytes, v_token_bytes, t, page);
  }

  // The prologue, after the copies of Q: K_0 (one group with Q's), then V_{j-1} and
  // K_j for j < kStages (a group each); then the pages of the first K the loop copies.
  __device__ __forceinline__ void start(int num_tiles) {
    // The page ids of the first tiles are read together (one round trip, not one each).
    HopperRowPlace first_pages[S::kStages + 1];
#pragma unroll
    for (int j = 0; j <= S::kStages; ++j) first_pages[j] = j < num_tiles ? fetch_page(j) : HopperRowPlace{0, 0};
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
  }

  // In iteration t, while the tensor cores work, the copies into free stages (one
  // group): K_{t+S} takes K_t's (read by S_t, completed in iteration t - 1) and
  // V_{t+S-1} takes V_{t-1}'s (read by O += P V of iteration t - 1), S = kStages.
  // Paged, the caller then moves k_page and v_page on.
  __device__ __forceinline__ void copy_ahead(int t, int num_tiles) const {
    if (t + S::kStages < num_tiles) load_k(t + S::kStages, k_page);
    if (t + S::kStages - 1 < num_tiles) load_v(t + S::kStages - 1, v_page);
    ptx::cp_async_commit();
  }
};

}  // namespace kvinfer::cuda
