// SPDX-License-Identifier: Apache-2.0
// The MLA wgmma kernel's producer: its warpgroup's 128 threads gather each key tile's
// 64 latent rows by page id with cp.async into a stage of the ring, in the layout the
// consumers' wgmma descriptors read (64-column panels in the 128-byte swizzle), for any
// page size. Included by its kernel.cuh.
//
// Per tile: threads 0-63 each look up one row (its page id, loaded a tile ahead, and
// the byte offsets of its ckv and kpe rows) into a table in shared memory; after the
// warpgroup's barrier, thread i copies 16-byte chunk i % 64 of every other ckv row
// (64 threads to a 1024-byte row: coalesced) and chunk i % 8 of every 16th kpe row,
// from the table's offsets; then it arrives on the stage's full barrier through
// cp.async.mbarrier.arrive, which fires once its copies land (the barrier expects all
// 128). Rows past the item's keys are zeros: their logits are masked, and a zero
// weight times a zero adds nothing to O, where stale bytes could hold a NaN.
// Page ids are checked (checked_page: clamped into the cache, the largest id kept):
// the kernel discards an item that used a bad one.
#pragma once

#include <cstdint>

#include "cuda/common/device_status.cuh"
#include "cuda/common/mbarrier.cuh"
#include "cuda/common/named_barrier.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/mla/mla_keys.cuh"
#include "cuda/mla/mla_kernel_params.cuh"
#include "cuda/mla/wgmma/shape.cuh"

namespace kvinfer::cuda {

// The ring of key tiles and its barriers.
template <class S>
struct MlaWgmmaRing {
  unsigned char* base;  // the 1024-aligned shared memory
  __device__ __forceinline__ std::uint64_t* full(int t) const {
    return reinterpret_cast<std::uint64_t*>(base + S::barriers) + t % S::kStages;
  }
  __device__ __forceinline__ std::uint64_t* empty(int t) const {
    return reinterpret_cast<std::uint64_t*>(base + S::barriers) + S::kStages + t % S::kStages;
  }
  // The shared-window address of tile t's stage.
  __device__ __forceinline__ unsigned tile(int t) const {
    return static_cast<unsigned>(__cvta_generic_to_shared(base)) + unsigned(S::kv + (t % S::kStages) * S::kTileBytes);
  }
  // The parity of tile t's use of its stage (the ring's pass).
  __device__ __forceinline__ static unsigned pass(int t) { return unsigned(t / S::kStages) & 1u; }
  // One thread: a full barrier takes each producer thread's arrival, an empty one
  // each consumer warpgroup's.
  __device__ __forceinline__ void init() const {
    for (int s = 0; s < S::kStages; ++s) {
      mbarrier::init(full(s), S::kProducerThreads);
      mbarrier::init(empty(s), 2);
    }
    mbarrier::fence_init();
  }
};

template <class S>
struct MlaWgmmaGather {
  static constexpr int kCkvChunks = S::kDc / 8;                              // 64 per row
  static constexpr int kCkvRowStep = S::kProducerThreads / kCkvChunks;       // 2
  static constexpr int kKpeChunks = (S::kDqk - S::kDc) / 8;                  // 8 per row (0 without kpe)
  static constexpr int kKpeRowStep = kKpeChunks > 0 ? S::kProducerThreads / kKpeChunks : 1;  // 16
  static constexpr int kBatch = 4;  // offsets loaded ahead of their copies

  const MlaKernelParams& p;
  const MlaKeys& keys;
  std::int64_t* table;  // [row][ckv, kpe] byte offsets
  const char* ckv_src;  // chunk c of ckv row 0 (plus a row's offset)
  const char* kpe_src;
  int thread;
  std::int32_t next_page = 0;  // threads < kKeys: the page id of their row of the next tile

  __device__ __forceinline__ MlaWgmmaGather(const MlaKernelParams& p, const MlaKeys& keys, unsigned char* smem,
                                            int thread)
      : p(p),
        keys(keys),
        table(reinterpret_cast<std::int64_t*>(smem + S::table)),
        ckv_src(static_cast<const char*>(p.ckv.data) + (thread % kCkvChunks) * 16),
        kpe_src(S::kKpe ? static_cast<const char*>(p.kpe.data) + (thread % (kKpeChunks > 0 ? kKpeChunks : 1)) * 16
                        : nullptr),
        thread(thread) {
    load_page(keys.key_begin + thread);
  }

  // The table of the tile at key0: each row's offsets (0 past the keys, whose page-table
  // entries are not read), between two barriers of the warpgroup: the first orders the
  // previous tile's reads of the table before these writes, the second these writes
  // before this tile's copies.
  __device__ __forceinline__ void look_up(int key0) {
    named_barrier::sync<S::kTableBarrier, S::kProducerThreads>();
    if (thread < S::kKeys) {
      const int key = key0 + thread;
      std::int64_t ckv = 0, kpe = 0;
      if (key < keys.key_end) {
        const std::int64_t page = checked_page(next_page, p.pages.num_pages, keys.seen);
        std::uint32_t slot = 0;
        (void)p.pages.page_size.divmod(std::uint32_t(key), &slot);
        ckv = (page * p.ckv.stride_page + std::int64_t(slot) * p.ckv.stride_token) * 2;
        if constexpr (S::kKpe) kpe = (page * p.kpe.stride_page + std::int64_t(slot) * p.kpe.stride_token) * 2;
      }
      load_page(key + S::kKeys);
      table[2 * thread] = ckv;
      table[2 * thread + 1] = kpe;
    }
    named_barrier::sync<S::kTableBarrier, S::kProducerThreads>();
  }

  // The tile's rows into `tile`, zeros from row `valid` on, then this thread's arrival
  // on `full` once its copies land.
  template <bool kPartial>
  __device__ __forceinline__ void copy(unsigned tile, int valid, std::uint64_t* full) const {
    {
      // Rows r0 + 2i: the swizzled chunk repeats every 8 rows, so four bases (rows
      // r0 + 2k, k < 4) and immediates (8 rows apart: 1024 bytes) address them all.
      const int c = thread % kCkvChunks, r0 = thread / kCkvChunks;
      constexpr int kPhases = 8 / kCkvRowStep;
      unsigned base[kPhases];
#pragma unroll
      for (int k = 0; k < kPhases; ++k) {
        const int row = r0 + k * kCkvRowStep;
        base[k] = tile + unsigned((c / 8) * S::kPanelBytes + row * 128 + (((c & 7) ^ (row & 7)) * 16));
      }
#pragma unroll
      for (int b = 0; b < S::kKeys / kCkvRowStep; b += kBatch) {
        std::int64_t offset[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) offset[j] = table[2 * (r0 + (b + j) * kCkvRowStep)];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int i = b + j;
          const unsigned to = base[i % kPhases] + unsigned(i / kPhases) * 8 * 128;
          if constexpr (kPartial) {
            ptx::cp_async_or_zero<16>(to, ckv_src + offset[j], r0 + i * kCkvRowStep < valid);
          } else {
            ptx::cp_async_16(to, ckv_src + offset[j]);
          }
        }
      }
    }
    if constexpr (S::kKpe) {
      const int c = thread % kKpeChunks, r0 = thread / kKpeChunks;  // rows r0 + 16i: one swizzle
      const unsigned base = tile + unsigned((S::kDc / 64) * S::kPanelBytes + r0 * 128 + ((c ^ (r0 & 7)) * 16));
#pragma unroll
      for (int i = 0; i < S::kKeys / kKpeRowStep; ++i) {
        const char* src = kpe_src + table[2 * (r0 + i * kKpeRowStep) + 1];
        const unsigned to = base + unsigned(i * kKpeRowStep * 128);
        if constexpr (kPartial) {
          ptx::cp_async_or_zero<16>(to, src, r0 + i * kKpeRowStep < valid);
        } else {
          ptx::cp_async_16(to, src);
        }
      }
    }
    mbarrier::arrive_on_copies(full);
  }

 private:
  __device__ __forceinline__ void load_page(int key) {
    if (thread < S::kKeys && key < keys.key_end) next_page = keys.pages[p.pages.page_size.div(std::uint32_t(key))];
  }
};

// The producer warpgroup's loop: each tile into its stage once both consumers released
// the stage's previous tile.
template <class S>
__device__ __forceinline__ void mla_wgmma_produce(const MlaKernelParams& p, const MlaKeys& keys,
                                                  const MlaWgmmaRing<S>& ring, unsigned char* smem, int thread) {
  static_assert(MlaWgmmaGather<S>::kCkvRowStep * MlaWgmmaGather<S>::kCkvChunks == S::kProducerThreads);
  if (keys.num_tiles == 0) return;
  MlaWgmmaGather<S> g(p, keys, smem, thread);
  for (int t = 0; t < keys.num_tiles; ++t) {
    const int key0 = keys.key_begin + t * S::kKeys;
    g.look_up(key0);
    mbarrier::wait(ring.empty(t), ring.pass(t) ^ 1u);
    if (key0 + S::kKeys <= keys.key_end) {
      g.template copy<false>(ring.tile(t), S::kKeys, ring.full(t));
    } else {
      g.template copy<true>(ring.tile(t), keys.key_end - key0, ring.full(t));
    }
  }
  ptx::cp_async_wait_all();  // the copies land before the thread leaves
}

}  // namespace kvinfer::cuda
