// SPDX-License-Identifier: Apache-2.0
// The copies into shared memory: a 16-bit row tile (Q), and one K/V tile of a paged or
// ragged cache (cp.async, zero-filled past the item's keys, pages looked up ahead).
#pragma once

#include <cuda_runtime.h>
#include <type_traits>
#include "cuda/attention/tile/key_access.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/attention/tile/tile_threads.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

// Copies kRows rows of D 16-bit elements into a swizzled tile; rows >= valid are zeros.
// (kItemWarps: the copying threads are a warp of an item-warp CTA; tile_thread.)
// kPadded: the rows hold `chunks` 16-byte chunks, the rest of the tile's row is zeros.
template <int kThreads, int kRows, int D, template <int, int> class Layout = SwizzledRows, bool kItemWarps = false,
          bool kPadded = false, class RowPtr>
__device__ __forceinline__ void load_tile16(unsigned char* tile, const RowPtr& row_ptr, int valid, int chunks = 0) {
  constexpr int kChunks = D / 8;
  static_assert(kRows * kChunks % kThreads == 0);
#pragma unroll
  for (int it = 0; it < kRows * kChunks / kThreads; ++it) {
    const int idx = it * kThreads + tile_thread<kItemWarps>();
    const int row = idx / kChunks, c = idx % kChunks;
    const bool ok = row < valid && (!kPadded || c < chunks);
    const char* src = row_ptr(ok ? row : 0) + c * 16;
    ptx::cp_async_or_zero<16>(tile + Layout<D, kRows>::offset(row, c), src, ok);
  }
}

// Issues the copies of key rows [key0, key0 + kKeys) of one KV tensor (rows >= valid
// zero-filled, so that masked keys never multiply garbage: 0 * NaN would poison O),
// and of the other tensor's same rows when kAlsoV (one page-table lookup serves
// both). 16-bit KV goes to the swizzled compute tiles in 16-byte chunks; fp8 to the
// raw staging tile (rows of D bytes) in 8-byte chunks, the alignment fp8 rows are
// guaranteed. A one-warp CTA passes the rows' pages, looked up a tile ahead. kPadded:
// a row holds `units` of the tile's (v_units of the other tensor's rows); the rest
// are zeros.
template <class TKV, int kThreads, int kKeys, int D, bool kPaged, bool kAlsoV, bool kItemWarps, bool kPadded = false>
__device__ __forceinline__ void copy_key_rows(unsigned char* tile, unsigned char* v_tile, const KeyLocator& locate,
                                              const KeyRow& key_row, const KeyRow& v_row, int key0, int valid,
                                              const PagesAhead<kKeys>* ahead, int units = 0, int v_units = 0) {
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
        ptx::cp_async_or_zero<kUnitBytes>(dst(tile), k_src + it * kRowsPerStep * key_row.stride_token,
                                          ok && (!kPadded || c < units));
        if constexpr (kAlsoV) {
          ptx::cp_async_or_zero<kUnitBytes>(dst(v_tile), v_src + it * kRowsPerStep * v_row.stride_token,
                                            ok && (!kPadded || c < v_units));
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
    ptx::cp_async_or_zero<kUnitBytes>(dst(tile), key_row(at) + c * kUnitBytes, ok && (!kPadded || c < units));
    if constexpr (kAlsoV) {
      ptx::cp_async_or_zero<kUnitBytes>(dst(v_tile), v_row(at) + c * kUnitBytes, ok && (!kPadded || c < v_units));
    }
  }
}

// The copies of one KV tile: K rows into k_dst and V rows into v_dst (for fp8, the
// staging tile holds K rows of DQK bytes, then V rows of DVO bytes). kPadded: the
// problem's head dims `dims` (8-element units of K's and V's rows), zeros past them.
template <class TKV, int kThreads, int kKeys, int DQK, int DVO, bool kItemWarps = false, bool kPadded = false>
__device__ __forceinline__ void load_kv_tile(unsigned char* k_dst, unsigned char* v_dst, const KeyLocator& locate,
                                             const KeyRow& k_row, const KeyRow& v_row, int key0, int valid,
                                             const PagesAhead<kKeys>* ahead, int k_units = 0, int v_units = 0) {
  const auto copy_kv = [&](auto paged) {
    constexpr bool kPaged = decltype(paged)::value;
    if constexpr (DQK == DVO) {
      copy_key_rows<TKV, kThreads, kKeys, DQK, kPaged, true, kItemWarps, kPadded>(k_dst, v_dst, locate, k_row, v_row,
                                                                                 key0, valid, ahead, k_units, v_units);
    } else {
      copy_key_rows<TKV, kThreads, kKeys, DQK, kPaged, false, kItemWarps, kPadded>(k_dst, nullptr, locate, k_row, k_row,
                                                                                  key0, valid, ahead, k_units);
      copy_key_rows<TKV, kThreads, kKeys, DVO, kPaged, false, kItemWarps, kPadded>(v_dst, nullptr, locate, v_row, v_row,
                                                                                  key0, valid, ahead, v_units);
    }
  };
  if (locate.pages != nullptr) {
    copy_kv(std::true_type{});
  } else {
    copy_kv(std::false_type{});
  }
}

}  // namespace kvinfer::cuda
