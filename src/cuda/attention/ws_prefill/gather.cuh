// SPDX-License-Identifier: Apache-2.0
// The warp-specialised prefill's producer for a paged cache: the producer warpgroup's
// 128 threads gather each key tile's rows by page id with cp.async into the ring's
// stages (the layout the TMA boxes of ragged KV land in), for any page size. Included
// by its kernel.cuh.
//
// Why a gather and not TMA: a box is one head of one page, so a tile of pages of 16
// slots is 8 boxes per 64-column panel; on the H200 those copies were no faster than
// the wgmma mainloop's row gathers (docs/log/ws-prefill-2026-12-03.md).
//
// Per tile, each producer thread first looks up one row (row = thread): its page id
// (loaded a tile ahead) and its byte offset in the cache, which it writes to a table
// in shared memory (two tiles' tables, alternating); after the warpgroup's barrier,
// each thread copies
// 16-byte chunk c of rows r0, r0 + R, ... (R = 128 / chunks per row: 16 threads to a
// 256-byte row, coalesced) from the table's offsets, for K and then for V (K and V
// rows of a key share one offset: the launch requires equal strides). So a tile costs
// a thread one page-table load and a few instructions per chunk, all issued while the
// consumers compute. A thread never waits for its own copies: it arrives on the
// stage's full barrier through cp.async.mbarrier.arrive (the barrier expects all 128),
// which fires once they land.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/key_access.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/attention/ws_prefill/shape.cuh"
#include "cuda/common/mbarrier.cuh"
#include "cuda/common/named_barrier.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

template <int D>
struct WsGather {
  using S = WsPrefillShape<D>;
  static constexpr int kThreads = 128;
  static constexpr int kChunks = D / 8;                // 16-byte chunks of a row
  static constexpr int kRowStep = kThreads / kChunks;  // rows one pass covers: 16, 8, 4
  static constexpr int kRowsPerThread = S::kKeys / kRowStep;
  static_assert(kThreads % kChunks == 0 && S::kKeys % kRowStep == 0 && S::kKeys <= kThreads);

  KeyLocator locate;
  std::int64_t stride_page, stride_token;  // bytes, of K and of V alike
  const char* k_src;                       // the item's head in K, chunk c
  const char* v_src;
  std::int64_t* table;                     // two tiles' row offsets, in shared memory
  int key_end;
  int thread;
  int r0, c;  // the thread's first row of a tile and its chunk

  __device__ __forceinline__ WsGather(const AttentionKernelParams& p, const detail::WorkItem& item,
                                      unsigned char* smem, int key_end, int thread)
      : locate(item_locator(p, item)),
        table(reinterpret_cast<std::int64_t*>(smem + S::row_offsets)),
        key_end(key_end),
        thread(thread),
        r0(thread / kChunks),
        c(thread % kChunks) {
    const ItemRows rows = item_rows(p, item, 2);
    stride_page = rows.k.stride_page;
    stride_token = rows.k.stride_token;
    k_src = rows.k.base + c * 16;
    v_src = rows.v.base + c * 16;
  }

  // Table t % 2 for the tile from key0: the offset of each row's key (0 past the keys,
  // whose page-table entries are not read), then the warpgroup's barrier. The previous
  // barrier ordered the last reads of this table (tile t - 2's V copies) before these
  // writes. The row's page id comes from the load issued for the previous tile (or by
  // start()), so that no tile waits for the page table.
  __device__ __forceinline__ void look_up(int t, int key0) {
    if (thread < S::kKeys) {
      const int key = key0 + thread;
      std::int64_t offset = 0;
      if (key < key_end) {
        const KeySlot at = locate.on_page(key, next_page);
        offset = at.page * stride_page + at.slot * stride_token;
      }
      load_page(key + S::kKeys);
      table[(t & 1) * S::kKeys + thread] = offset;
    }
    named_barrier::sync<S::kGatherBarrier, kThreads>();
  }
  // The first tile's page loads.
  __device__ __forceinline__ void start(int key_begin) {
    if (thread < S::kKeys) load_page(key_begin + thread);
  }

  // The rows of tile t (from key0; table t % 2) of K or V into a stage, zeros past the
  // keys (so that a partial last tile needs no pass of its own: its masked keys
  // multiply zeros), then this thread's arrival on `full` once they land. Per chunk:
  // its offset (loaded kBatch at a time, ahead of the copies), an add and the copy; a
  // whole tile of keys skips the zero-fill's predicate.
  __device__ __forceinline__ void copy(unsigned char* tile, const char* src, int t, int key0,
                                       std::uint64_t* full) const {
    if (key0 + S::kKeys <= key_end) {
      copy_rows<false>(tile, src, t, 0);
    } else {
      copy_rows<true>(tile, src, t, key_end - key0);
    }
    mbarrier::arrive_on_copies(full);
  }

 private:
  std::int32_t next_page = 0;  // the page of this thread's row of the next tile

  __device__ __forceinline__ void load_page(int key) {
    if (key < key_end) next_page = locate.page_of(key);
  }

  static constexpr int kBatch = 4;  // offsets in registers at once (the producer has 40)
  static_assert(kRowsPerThread % kBatch == 0);

  // The shared-memory offset of row r0 + i kRowStep, chunk c: the swizzle repeats every
  // 8 rows, so with kRowStep a multiple of 8 every row has row r0's swizzled chunk (one
  // base plus immediates), and with 4 rows two bases alternate.
  __device__ __forceinline__ int dst(int i) const {
    using L = SwizzledPanels<D, S::kKeys>;
    if constexpr (kRowStep % 8 == 0) {
      return L::offset(r0, c) + i * kRowStep * L::kRowBytes;
    } else {
      static_assert(kRowStep == 4);
      return L::offset(r0 + (i & 1) * kRowStep, c) + (i >> 1) * 2 * kRowStep * L::kRowBytes;
    }
  }

  template <bool kPartial>
  __device__ __forceinline__ void copy_rows(unsigned char* tile, const char* src, int t, int valid) const {
    const std::int64_t* offsets = table + (t & 1) * S::kKeys + r0;
#pragma unroll
    for (int b = 0; b < kRowsPerThread; b += kBatch) {
      std::int64_t offset[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) offset[j] = offsets[(b + j) * kRowStep];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if constexpr (kPartial) {
          ptx::cp_async_or_zero<16>(tile + dst(b + j), src + offset[j], r0 + (b + j) * kRowStep < valid);
        } else {
          ptx::cp_async_16(tile + dst(b + j), src + offset[j]);
        }
      }
    }
  }
};

// The producer warpgroup's loop for a paged cache: K_0, then V_t and K_{t+1} for each
// tile t, each into its stage once both consumers released the stage's previous tile.
// (V_t before K_{t+1}: V_t's copy reads the table K_t's did, and K_{t+1}'s the next,
// so that two tables suffice.)
template <int D, class Ring>
__device__ __forceinline__ void gather_kv(const AttentionKernelParams& p, const detail::WorkItem& item,
                                          const Ring& ring, unsigned char* smem, int key_begin, int key_end,
                                          int num_tiles, int thread) {
  using G = WsGather<D>;
  constexpr int kKeys = G::S::kKeys;
  if (num_tiles == 0) return;
  G g(p, item, smem, key_end, thread);
  g.start(key_begin);
  g.look_up(0, key_begin);
  g.copy(ring.k_tile(0), g.k_src, 0, key_begin, ring.full_k(0));
  for (int t = 0; t < num_tiles; ++t) {
    mbarrier::wait(ring.empty_v(t), ring.pass(t) ^ 1u);
    g.copy(ring.v_tile(t), g.v_src, t, key_begin + t * kKeys, ring.full_v(t));
    if (t + 1 < num_tiles) {
      g.look_up(t + 1, key_begin + (t + 1) * kKeys);
      mbarrier::wait(ring.empty_k(t + 1), ring.pass(t + 1) ^ 1u);
      g.copy(ring.k_tile(t + 1), g.k_src, t + 1, key_begin + (t + 1) * kKeys, ring.full_k(t + 1));
    }
  }
  // The copies land before the thread exits (their arrivals are the consumers' wait).
  ptx::cp_async_wait_all();
}

}  // namespace kvinfer::cuda
