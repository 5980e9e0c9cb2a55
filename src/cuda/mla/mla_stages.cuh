// SPDX-License-Identifier: Apache-2.0
// The copies of an MLA item into shared memory: its q tile once, then its key tiles
// through the ring of stages (cp.async, kStages - 1 tiles in flight), each key row's
// page looked up a tile before its copy; fp8 tiles land raw (mla_fp8.cuh reads them),
// with the q tile put in the order that read takes once; fp16 KV under a bf16 mma is
// converted in place. The kernel's main loop only asks for the next tile
// (mla_next_tile), so the pipeline's order lives here. Included by mla_kernel.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/device_status.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/mla/mla_kernel_params.cuh"
#include "cuda/mla/mla_fp8.cuh"
#include "cuda/mla/mla_keys.cuh"

namespace kvinfer::cuda {

// Copies the q tile: packed row i < rows is q_nope (then q_pe) of token
// (row_begin + i) / H, head (row_begin + i) % H; rows past the item's are zeros.
template <class S>
__device__ __forceinline__ void mla_copy_q(const MlaKernelParams& p, const detail::WorkItem& item,
                                           const detail::RequestInfo& r, int rows, unsigned char* q_tile) {
  constexpr int kChunks = S::kDqk / 8;
  for (int idx = int(threadIdx.x); idx < S::kRows * kChunks; idx += S::kThreads) {
    const int row = idx / kChunks, c = idx % kChunks;
    const bool valid = row < rows;
    std::uint32_t head = 0;
    const std::int64_t token = valid ? p.num_heads.divmod(std::uint32_t(item.row_begin + row), &head) : 0;
    const std::int64_t n = r.qo_begin + token;
    const char* src = c < S::kDc / 8
                          ? static_cast<const char*>(p.q_nope.data) +
                                (n * p.q_nope.stride_n + head * p.q_nope.stride_h) * 2 + c * 16
                          : static_cast<const char*>(p.q_pe.data) +
                                (n * p.q_pe.stride_n + head * p.q_pe.stride_h) * 2 + (c - S::kDc / 8) * 16;
    ptx::cp_async_or_zero<16>(q_tile + swizzled_chunk<S::kDqk>(row, c) * 16, src, valid);
  }
}

// The key row a thread copies of the tile at key0 (kThreadsPerKey threads per key):
// its page and slot, looked up a tile before its copy is issued, so that the copy
// does not wait for the page id's load (a DRAM or L2 latency, in every tile). The id
// is checked (checked_page) into `seen`.
struct MlaKeyRow {
  std::int64_t page;
  std::uint32_t slot;
  bool valid;  // a key of the item's range; past key_end the copy writes zeros
};
template <class S>
__device__ __forceinline__ MlaKeyRow mla_key_row(const MlaKernelParams& p, const std::int32_t* pages,
                                                 int key0, int key_end, std::uint32_t& seen) {
  const int kv = key0 + int(threadIdx.x) / S::kThreadsPerKey;
  MlaKeyRow row;
  row.valid = kv < key_end;
  const std::uint32_t page_slot = p.pages.page_size.divmod(std::uint32_t(row.valid ? kv : 0), &row.slot);
  row.page = row.valid ? checked_page(pages[page_slot], p.pages.num_pages, seen) : 0;
  return row;
}

// Copies a thread's part of its key row into a tile: 16-bit KV into the swizzled
// tile of ldmatrix, fp8 into the raw tile (MlaRawTile). Keys at or past key_end are
// zeros (their logits are masked, and a zero times a zero weight adds nothing to O,
// where stale bytes could hold NaN).
template <class TKV, class S>
__device__ __forceinline__ void mla_copy_kv(const MlaKernelParams& p, const MlaKeyRow& row,
                                            unsigned char* dst) {
  const int key = int(threadIdx.x) / S::kThreadsPerKey, sub = int(threadIdx.x) % S::kThreadsPerKey;
  const bool valid = row.valid;
  const std::int64_t page = row.page, slot = row.slot;
  constexpr auto kElem = std::int64_t(sizeof(TKV));
  const char* ckv =
      static_cast<const char*>(p.ckv.data) + (page * p.ckv.stride_page + slot * p.ckv.stride_token) * kElem;
  const char* kpe = nullptr;
  if constexpr (S::kKpe) {
    kpe =
        static_cast<const char*>(p.kpe.data) + (page * p.kpe.stride_page + slot * p.kpe.stride_token) * kElem;
  }
  // 16-byte chunks of the row: 8 elements of 16-bit KV, 16 of fp8.
  constexpr int kElemsPerChunk = 16 / int(kElem);
  constexpr int kCkvChunks = S::kDc / kElemsPerChunk, kChunks = S::kDqk / kElemsPerChunk;
#pragma unroll
  for (int i = 0; i < (kChunks + S::kThreadsPerKey - 1) / S::kThreadsPerKey; ++i) {
    const int c = sub + S::kThreadsPerKey * i;
    if (kChunks % S::kThreadsPerKey != 0 && c >= kChunks) break;
    const char* src = c < kCkvChunks ? ckv + c * 16 : kpe + (c - kCkvChunks) * 16;
    unsigned char* to = kElem == 2 ? dst + swizzled_chunk<S::kDqk>(key, c) * 16
                                   : dst + MlaRawTile<S>::chunk_offset(key, c);
    ptx::cp_async_or_zero<16>(to, src, valid);
  }
}

// Converts a 16-bit fp16 tile of `chunks` 16-byte chunks to bf16 in place, each chunk by
// one thread (mixed fp16/bf16: the q tile once, or each KV tile). No barrier.
template <class S>
__device__ __forceinline__ void mla_half_to_bf16(unsigned char* tile, int chunks) {
  for (int i = int(threadIdx.x); i < chunks; i += S::kThreads) {
    uint4 v = reinterpret_cast<const uint4*>(tile)[i];
    auto* w = reinterpret_cast<std::uint32_t*>(&v);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 x = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
      w[j] = mma::pack2<__nv_bfloat16>(x.x, x.y);
    }
    reinterpret_cast<uint4*>(tile)[i] = v;
  }
}

// The stage of the ring that tile `tile` lands in.
template <class L>
__device__ __forceinline__ unsigned char* mla_stage(unsigned char* smem, int tile) {
  return smem + L::stages + (tile % L::kStages) * L::kStageBytes;
}

// The prologue: one commit group for q, then one per tile (empty past the last),
// kStages - 1 ahead. With fp8 KV the q tile, once landed, is put in the fp8 read's
// order as fp16 (mla_q_to_fp8_operand); an fp16 query over bf16 KV is converted to
// bf16. Returns q_scale (1 but for a bf16 query over fp8 KV).
template <class T, class TQ, class TKV, class L>
__device__ __forceinline__ float mla_start(const MlaKernelParams& p, const detail::WorkItem& item,
                                           const detail::RequestInfo& r, int rows, const MlaKeys& keys,
                                           unsigned char* smem) {
  using S = typename L::S;
  mla_copy_q<S>(p, item, r, rows, smem + L::q);
  ptx::cp_async_commit();
#pragma unroll
  for (int t = 0; t + 1 < L::kStages; ++t) {
    if (t < keys.num_tiles)
      mla_copy_kv<TKV, S>(p, mla_key_row<S>(p, keys.pages, keys.key_begin + t * S::kKeys, keys.key_end, keys.seen),
                          mla_stage<L>(smem, t));
    ptx::cp_async_commit();
  }
  float q_scale = 1.0f;
  if constexpr (L::kFp8 || !std::is_same_v<T, TQ>) {
    ptx::cp_async_wait_group<L::kStages - 1>();  // the q tile (this thread's copies)
    __syncthreads();
    if constexpr (L::kFp8) {
      q_scale = mla_q_to_fp8_operand<TQ, S>(smem + L::q, reinterpret_cast<float*>(smem + L::s));
    } else {
      mla_half_to_bf16<S>(smem + L::q, S::kRows * S::kDqk / 8);
      __syncthreads();
    }
  }
  return q_scale;
}

// The key row of the first copy the main loop issues (tile kStages - 1).
template <class L>
__device__ __forceinline__ MlaKeyRow mla_first_key_row(const MlaKernelParams& p, const MlaKeys& keys) {
  using S = typename L::S;
  return mla_key_row<S>(p, keys.pages, keys.key_begin + (L::kStages - 1) * S::kKeys, keys.key_end, keys.seen);
}

// Tile `tile` of the main loop, ready for S and P V: waits for its copies, issues the
// copy kStages - 1 tiles ahead with next_row, then looks up the key row of the copy
// after it into next_row; fp16 KV under a bf16 mma (T) is converted in place. Returns
// the tile: K by its kDqk columns, V by its first 512 (fp8: the raw tile).
template <class T, class TKV, class L>
__device__ __forceinline__ unsigned char* mla_next_tile(const MlaKernelParams& p, const MlaKeys& keys,
                                                        unsigned char* smem, int tile, MlaKeyRow& next_row) {
  using S = typename L::S;
  ptx::cp_async_wait_group<L::kStages - 2>();
  // Tile `tile` (and the q tile) is visible, and every warp is done with the tile
  // before it, whose stage the next copy and whose S buffer this tile's S take.
  __syncthreads();
  const int ahead = tile + L::kStages - 1;
  if (ahead < keys.num_tiles) mla_copy_kv<TKV, S>(p, next_row, mla_stage<L>(smem, ahead));
  ptx::cp_async_commit();
  next_row = mla_key_row<S>(p, keys.pages, keys.key_begin + (ahead + 1) * S::kKeys, keys.key_end, keys.seen);
  unsigned char* kv = mla_stage<L>(smem, tile);
  if constexpr (!L::kFp8 && !std::is_same_v<T, TKV>) {
    mla_half_to_bf16<S>(kv, S::kKeys * S::kDqk / 8);
    __syncthreads();
  }
  return kv;
}

}  // namespace kvinfer::cuda
