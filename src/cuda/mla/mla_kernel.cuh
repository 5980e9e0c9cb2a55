// SPDX-License-Identifier: Apache-2.0
// MLA attention on tensor cores (mma.sync m16n8k16, ldmatrix, cp.async; sm_80 and
// later). One work item per CTA of 8 warps: a tile of 16, 32 or 64 packed query rows
// (tokens x heads of one request) against a chunk of the request's latent keys, in
// key tiles of 32. Every head reads the same latent rows, so a key tile is one
// [32, 576] block in shared memory (ckv's 512 columns, then kpe's 64) that serves as
// K for the logits and, by its first 512 columns, as V.
//
// The output is 512 wide, too wide for one warp's accumulators, so the warps split
// the work twice per tile:
//  - logits S = Q K^T: each warp takes (row block, 8 keys) units over all 576 dims,
//    or half the dims of one unit when the units are fewer than the warps; the
//    partial S go through shared memory (the nope and pe terms in separate
//    accumulators, each with its own scale);
//  - O += P V: each warp owns a row block and a slice of the 512 columns (64, 128 or
//    256), reads the block's S, and runs the online softmax itself. The warps of one
//    row block compute the same row maxima and sums from the same S, so no
//    reduction across warps is needed at the end.
// fp8 KV lands in a staging tile and is converted (exactly) to fp16, in which the
// mma then runs (a bf16 q tile is converted once per item, mla_q_to_half).
// The next tiles stream in (cp.async, a ring of stages) while one is computed. Items
// of 16 rows (decode with 16 heads) are bound by the chain of each tile (copy issue,
// S, two barriers (three for fp8), softmax, P V: ~470 instructions per warp at ~8
// cycles each), 64
// rows by shared-memory reads (ldmatrix of Q, K and V every tile: L1 at 79%);
// docs/kernels.md, "MLA".
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/mask_policy.hpp"
#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/math.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/device_status.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/mla/mla_kernel_params.cuh"

namespace kvinfer::cuda {

template <int kRowBlocks, bool kKpe>
struct MlaShape {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kDc = 512;                // ckv columns: the value width
  static constexpr int kDqk = kKpe ? 576 : 512;  // a key row: ckv, then kpe
  static constexpr int kRows = 16 * kRowBlocks;  // packed query rows of an item
  static constexpr int kKeys = 32;               // keys per tile
  static constexpr int kKeyFrags = kKeys / 8;    // n8 fragments of S per row block
  static constexpr int kQkSteps = kDqk / 16;     // k-steps of S
  static constexpr int kNopeSteps = kDc / 16;    // the first kNopeSteps are q_nope . ckv
  // S: units of (row block, 8 keys); with fewer units than warps, kKParts warps share
  // a unit, each over a contiguous part of the k-steps.
  static constexpr int kUnits = kRowBlocks * kKeyFrags;
  static constexpr int kKParts = kUnits >= kWarps ? 1 : kWarps / kUnits;
  static constexpr int kUnitsPerWarp = kUnits >= kWarps ? kUnits / kWarps : 1;
  static constexpr int kPartSteps = kQkSteps / kKParts;
  // O: kColSplit warps per row block, kCols columns each.
  static constexpr int kColSplit = kWarps / kRowBlocks;
  static constexpr int kCols = kDc / kColSplit;
  static constexpr int kOFrags = kCols / 8;
  // Floats per row of the S exchange: 8 more than the keys spread a fragment's rows
  // over the banks.
  static constexpr int kSStride = kKeys + 8;
  // The copy of a key tile: kThreads / kKeys threads per key, one page lookup each.
  static constexpr int kThreadsPerKey = kThreads / kKeys;

  static_assert(kRowBlocks == 1 || kRowBlocks == 2 || kRowBlocks == 4);
  static_assert(kUnits % kWarps == 0 || kWarps % kUnits == 0);
  static_assert(kUnitsPerWarp <= 2 && kKeyFrags % kUnitsPerWarp == 0);
  static_assert(kPartSteps % 2 == 0 && kNopeSteps % 2 == 0,
                "k-steps go in pairs that do not mix nope and pe");
  static_assert(kThreadsPerKey == 8);
};

// Byte offsets of the shared-memory regions: the q tile, the S exchange, the tiles
// the copies land in (a ring of kStages: compute tiles for 16-bit KV; for fp8 staging
// tiles, behind the one compute tile they are converted into). The ring takes what
// the CTA's share of the SM's shared memory leaves, up to 8 tiles. Items of 16 rows
// run two CTAs per SM, whose tile chains (copy issue, S, barriers, softmax, P V)
// overlap: with one CTA per SM and 4 stages in flight instead of one, 16 heads took
// 1.2x as long (docs/kernels.md, "MLA"): the chain, not the bytes in flight,
// sets their pace.
template <class TKV, int kRowBlocks, bool kKpe>
struct MlaSmem {
  using S = MlaShape<kRowBlocks, kKpe>;
  static constexpr bool kStaged = sizeof(TKV) == 1;
  static constexpr int kTileBytes = S::kKeys * S::kDqk * 2;
  static constexpr int kStageBytes = kStaged ? S::kKeys * S::kDqk : kTileBytes;
  static constexpr int q = 0;
  static constexpr int s = q + S::kRows * S::kDqk * 2;
  static constexpr int compute =
      s + (S::kKParts * S::kRows * S::kSStride * int(sizeof(float)) + 127) / 128 * 128;
  static constexpr int stages = compute + (kStaged ? kTileBytes : 0);
  static constexpr int kCtasPerSm = kRowBlocks == 1 ? 2 : 1;
  // The CTA's share of the SM's 228 KiB of shared memory (sm_90; 1 KiB of each CTA's
  // share is reserved).
  static constexpr int kBudget = (kCtasPerSm == 2 ? 112 : 227) * 1024;
  static constexpr int kStages = (kBudget - stages) / kStageBytes < 8 ? (kBudget - stages) / kStageBytes : 8;
  static constexpr int bytes = stages + kStages * kStageBytes;
  static_assert(s % 128 == 0 && compute % 128 == 0 && stages % 128 == 0 && kStages >= 2);
};

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
                          ? static_cast<const char*>(p.q_nope) +
                                (n * p.q_nope_stride_n + head * p.q_nope_stride_h) * 2 + c * 16
                          : static_cast<const char*>(p.q_pe) +
                                (n * p.q_pe_stride_n + head * p.q_pe_stride_h) * 2 + (c - S::kDc / 8) * 16;
    ptx::cp_async_or_zero<16>(q_tile + swizzled_chunk<S::kDqk>(row, c) * 16, src, valid);
  }
}

// The key row a thread copies of the tile at key0 (kThreadsPerKey threads per key):
// its page and slot, looked up a tile before its copy is issued, so that the copy
// does not wait for the page id's load (a DRAM or L2 latency, in every tile). A page
// id out of range sets `bad` (checked_page).
struct MlaKeyRow {
  std::int64_t page;
  std::uint32_t slot;
  bool valid;  // a key of the item's range; past key_end the copy writes zeros
};
template <class S>
__device__ __forceinline__ MlaKeyRow mla_key_row(const MlaKernelParams& p, const std::int32_t* pages,
                                                 int key0, int key_end, bool& bad) {
  const int kv = key0 + int(threadIdx.x) / S::kThreadsPerKey;
  MlaKeyRow row;
  row.valid = kv < key_end;
  const std::uint32_t page_slot = p.page_size.divmod(std::uint32_t(row.valid ? kv : 0), &row.slot);
  row.page = row.valid ? checked_page(pages[page_slot], p.num_pages, bad) : 0;
  return row;
}

// The end of an item whose lookups met a bad page id (CTA-uniform: every thread calls
// this): the first bad entry of its pages goes to the status, and its rows become
// zeros with LSE -inf, or, in a split, its partial LSE the value the merge turns into
// such a row (kBadChunkLse). The barrier orders these writes after the epilogue's.
template <class S>
__device__ __forceinline__ void discard_bad_item(const MlaKernelParams& p, const detail::WorkItem& item,
                                                 const detail::RequestInfo& r, int key_begin, int key_end, int rows,
                                                 bool bad) {
  if (!__syncthreads_or(bad)) return;
  if (threadIdx.x == 0) {
    const std::int64_t first = item.kv_base + p.page_size.div(std::uint32_t(key_begin));
    const std::int64_t last = item.kv_base + p.page_size.div(std::uint32_t(key_end - 1)) + 1;
    record_bad_pages(p.status, p.kv_indices, first, last, p.num_pages, item.request);
  }
  const std::int64_t heads = p.num_heads.divisor;
  constexpr int kChunks = S::kDc / 8;  // 16-byte chunks of a 16-bit output row
  for (int i = int(threadIdx.x); i < rows * kChunks; i += int(blockDim.x)) {
    std::uint32_t head = 0;
    const std::int64_t token = p.num_heads.divmod(std::uint32_t(item.row_begin + i / kChunks), &head);
    if (r.num_chunks > 1) {
      if (i % kChunks == 0) {
        p.partial_lse[(r.partial_begin + std::int64_t(item.chunk) * r.qo_len + token) * heads + head] = kBadChunkLse;
      }
      continue;
    }
    const std::int64_t n = r.qo_begin + token;
    ptx::st_v4(static_cast<char*>(p.o) + (n * p.o_stride_n + head * p.o_stride_h) * 2 + (i % kChunks) * 16,
               make_uint4(0, 0, 0, 0));
    if (p.lse != nullptr && i % kChunks == 0) p.lse[n * p.lse_stride_n + head * p.lse_stride_h] = -INFINITY;
  }
}

// Copies a thread's part of its key row into a tile: 16-bit KV into the swizzled
// compute tile, fp8 into the plain staging tile. Keys at or past key_end are zeros
// (their logits are masked, and a zero times a zero weight adds nothing to O, where
// stale bytes could hold NaN).
template <class TKV, class S, bool kKpe>
__device__ __forceinline__ void mla_copy_kv(const MlaKernelParams& p, const MlaKeyRow& row,
                                            unsigned char* dst) {
  const int key = int(threadIdx.x) / S::kThreadsPerKey, sub = int(threadIdx.x) % S::kThreadsPerKey;
  const bool valid = row.valid;
  const std::int64_t page = row.page, slot = row.slot;
  constexpr auto kElem = std::int64_t(sizeof(TKV));
  const char* ckv =
      static_cast<const char*>(p.ckv) + (page * p.ckv_stride_page + slot * p.ckv_stride_token) * kElem;
  const char* kpe = nullptr;
  if constexpr (kKpe) {
    kpe = static_cast<const char*>(p.kpe) + (page * p.kpe_stride_page + slot * p.kpe_stride_token) * kElem;
  }
  // 16-byte chunks of the row: 8 elements of 16-bit KV, 16 of fp8.
  constexpr int kElemsPerChunk = 16 / int(kElem);
  constexpr int kCkvChunks = S::kDc / kElemsPerChunk, kChunks = S::kDqk / kElemsPerChunk;
#pragma unroll
  for (int i = 0; i < (kChunks + S::kThreadsPerKey - 1) / S::kThreadsPerKey; ++i) {
    const int c = sub + S::kThreadsPerKey * i;
    if (kChunks % S::kThreadsPerKey != 0 && c >= kChunks) break;
    const char* src = c < kCkvChunks ? ckv + c * 16 : kpe + (c - kCkvChunks) * 16;
    unsigned char* to =
        kElem == 2 ? dst + swizzled_chunk<S::kDqk>(key, c) * 16 : dst + key * S::kDqk + c * 16;
    ptx::cp_async_or_zero<16>(to, src, valid);
  }
}

// Converts an fp8 staging tile into the fp16 compute tile: one cvt per pair of
// elements, exact (every e4m3 and e5m2 value is an fp16 value).
template <class TKV, class S>
__device__ __forceinline__ void mla_convert_kv(unsigned char* tile, const unsigned char* raw) {
  constexpr int kChunks = S::kDqk / 16;  // 16 fp8 elements each
  for (int idx = int(threadIdx.x); idx < S::kKeys * kChunks; idx += S::kThreads) {
    const int key = idx / kChunks, c = idx % kChunks;
    const uint4 v = *reinterpret_cast<const uint4*>(raw + key * S::kDqk + c * 16);
    uint4 lo, hi;
    fp8x4_to_half2x2<TKV>(v.x, lo.x, lo.y);
    fp8x4_to_half2x2<TKV>(v.y, lo.z, lo.w);
    fp8x4_to_half2x2<TKV>(v.z, hi.x, hi.y);
    fp8x4_to_half2x2<TKV>(v.w, hi.z, hi.w);
    reinterpret_cast<uint4*>(tile)[swizzled_chunk<S::kDqk>(key, 2 * c)] = lo;
    reinterpret_cast<uint4*>(tile)[swizzled_chunk<S::kDqk>(key, 2 * c + 1)] = hi;
  }
}

// With fp8 KV the mma runs in fp16, to which fp8 converts in one instruction (to bf16
// in four; on the H200 the fp16 path is only 1.5% faster at 16 heads, whose fp8 tiles
// are bound by the chain of each tile, not by the conversion): a bf16 q tile is
// converted in place, times the power of two q_scale that puts its largest magnitude
// in [2^14, 2^15). Every element within 2^-38 of the largest keeps its value exactly
// (bf16's 8-bit significands fit fp16's 11); smaller ones are below anything the
// fp32 logits resolve (the decode tile's argument, fp8_decode_tile/kernel.cuh). Returns
// q_scale; `scratch` holds a float per warp. Ends with a barrier.
template <class S>
__device__ __forceinline__ float mla_q_to_half(unsigned char* q_tile, float* scratch) {
  constexpr int kWords = S::kRows * S::kDqk / 2;  // bf16 pairs, in any order
  auto* words = reinterpret_cast<std::uint32_t*>(q_tile);
  float mx = 0.0f;
  for (int i = int(threadIdx.x); i < kWords; i += S::kThreads) {
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[i]));
    mx = fmaxf(mx, fmaxf(fabsf(x.x), fabsf(x.y)));
  }
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = mx;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < S::kWarps; ++w) mx = fmaxf(mx, scratch[w]);
  int e = 0;
  frexpf(mx, &e);  // mx < 2^e (0 for a zero tile)
  const float q_scale = ldexpf(1.0f, min(max(15 - e, -126), 126));
  for (int i = int(threadIdx.x); i < kWords; i += S::kThreads) {
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[i]));
    words[i] = mma::pack2<__half>(x.x * q_scale, x.y * q_scale);
  }
  __syncthreads();
  return q_scale;
}

template <class TQ, class TKV, int kRowBlocks, bool kKpe>
__global__ void __launch_bounds__(MlaShape<kRowBlocks, kKpe>::kThreads,
                                  MlaSmem<TKV, kRowBlocks, kKpe>::kCtasPerSm)
    mla_kernel(const __grid_constant__ MlaKernelParams p) {
  using S = MlaShape<kRowBlocks, kKpe>;
  using L = MlaSmem<TKV, kRowBlocks, kKpe>;
  // The mma operand type: the query's, or fp16 for fp8 KV (mla_q_to_half).
  using T = std::conditional_t<sizeof(TKV) == 1, __half, TQ>;
  extern __shared__ __align__(128) unsigned char smem[];

  const detail::WorkItem item = load_work_item(p.items + blockIdx.x);
  if (unused_item(item)) return;
  const detail::RequestInfo r = p.requests[item.request];
  wait_for_inputs();

  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int rows = item.row_end - item.row_begin;

  // The keys this item's rows see: up to key_end for the last row, full_end for all.
  detail::RequestMask mask;
  mask.causal = p.causal;
  mask.qo_len = r.qo_len;
  mask.kv_len = r.kv_len;
  const int tok_lo = int(p.num_heads.div(std::uint32_t(item.row_begin)));
  const int tok_hi = int(p.num_heads.div(std::uint32_t(item.row_end - 1)));
  const int key_begin = item.kv_begin;
  const int key_end = min(item.kv_end, mask.last_key(tok_hi));
  const int full_end = min(key_end, mask.last_key(tok_lo));
  const int num_tiles = key_end > key_begin ? (key_end - key_begin + S::kKeys - 1) / S::kKeys : 0;
  const std::int32_t* pages = p.kv_indices + item.kv_base;
  bool bad = false;  // a page id of this thread's lookups was out of range

  unsigned char* const q_tile = smem + L::q;
  float* const s_buf = reinterpret_cast<float*>(smem + L::s);
  const auto stage = [&](int tile) { return smem + L::stages + (tile % L::kStages) * L::kStageBytes; };

  // One commit group for q, then one per tile (empty past the last), kStages - 1 ahead.
  mla_copy_q<S>(p, item, r, rows, q_tile);
  ptx::cp_async_commit();
#pragma unroll
  for (int t = 0; t + 1 < L::kStages; ++t) {
    if (t < num_tiles)
      mla_copy_kv<TKV, S, kKpe>(p, mla_key_row<S>(p, pages, key_begin + t * S::kKeys, key_end, bad), stage(t));
    ptx::cp_async_commit();
  }
  float q_scale = 1.0f;
  if constexpr (!std::is_same_v<T, TQ>) {
    ptx::cp_async_wait_group<L::kStages - 1>();  // the q tile (this thread's copies)
    __syncthreads();
    q_scale = mla_q_to_half<S>(q_tile, reinterpret_cast<float*>(smem + L::s));
  }
  const float nope_scale = p.nope_scale / q_scale, pe_scale = p.pe_scale / q_scale;

  // The S role: units unit0.. of row block rb_s, k-steps of part kpart.
  const int kpart = warp % S::kKParts;
  const int unit0 = (warp / S::kKParts) * S::kUnitsPerWarp;
  const int rb_s = unit0 / S::kKeyFrags, frag0 = unit0 % S::kKeyFrags;
  const SwizzledLane<S::kDqk> q_lane(q_tile, lane % 16, lane / 16);
  // Lane addresses of K: one unit reads two k-steps of one fragment per ldmatrix.x4
  // (chunks c..c+3), two units one k-step of two fragments (rows 0-15, chunks c, c+1).
  const int k_lane_row = S::kUnitsPerWarp == 1 ? (lane & 7) : (lane & 7) + 8 * (lane >> 4);
  const int k_lane_chunk = S::kUnitsPerWarp == 1 ? (lane >> 3) : ((lane >> 3) & 1);

  // The O role: row block rb, columns [c0 * 8, c0 * 8 + kCols).
  const int rb = warp / S::kColSplit;
  const int c0 = (warp % S::kColSplit) * (S::kCols / 8);
  // The keys this lane's rows (g and g + 8 of block rb) see end at lim[h].
  int lim[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int token = int(p.num_heads.div(std::uint32_t(item.row_begin + rb * 16 + g + 8 * h)));
    lim[h] = min(key_end, mask.last_key(token));
  }
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  float acc[S::kOFrags][4];
#pragma unroll
  for (int n = 0; n < S::kOFrags; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

  MlaKeyRow next_row = mla_key_row<S>(p, pages, key_begin + (L::kStages - 1) * S::kKeys, key_end, bad);
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int key0 = key_begin + tile * S::kKeys;
    ptx::cp_async_wait_group<L::kStages - 2>();
    // Tile `tile` (and the q tile) is visible, and every warp is done with the tile
    // before it, whose stage the next copy and whose S buffer this tile's S take.
    __syncthreads();
    const int ahead = tile + L::kStages - 1;
    if (ahead < num_tiles) mla_copy_kv<TKV, S, kKpe>(p, next_row, stage(ahead));
    ptx::cp_async_commit();
    next_row = mla_key_row<S>(p, pages, key_begin + (ahead + 1) * S::kKeys, key_end, bad);
    unsigned char* kv = stage(tile);
    if constexpr (L::kStaged) {
      mla_convert_kv<TKV, S>(smem + L::compute, kv);
      kv = smem + L::compute;
      __syncthreads();
    }

    // ---- S = Q K^T: [unit][nope / pe][fragment]
    {
      float sacc[S::kUnitsPerWarp][2][4] = {};
      const SwizzledLane<S::kDqk> k_lane(kv, k_lane_row, k_lane_chunk);
#pragma unroll
      for (int k = 0; k < S::kQkSteps; k += 2) {
        if (k / S::kPartSteps != kpart) continue;
        const int pe = k >= S::kNopeSteps ? 1 : 0;
        std::uint32_t a0[4], a1[4];
        mma::ldmatrix_x4(a0, q_lane.at(rb_s * 16, 2 * k));
        mma::ldmatrix_x4(a1, q_lane.at(rb_s * 16, 2 * k + 2));
        if constexpr (S::kUnitsPerWarp == 1) {
          std::uint32_t b[4];
          mma::ldmatrix_x4(b, k_lane.at(8 * frag0, 2 * k));
          mma::m16n8k16<T>(sacc[0][pe], a0, b[0], b[1]);
          mma::m16n8k16<T>(sacc[0][pe], a1, b[2], b[3]);
        } else {
          std::uint32_t b[4], b1[4];
          mma::ldmatrix_x4(b, k_lane.at(8 * frag0, 2 * k));
          mma::ldmatrix_x4(b1, k_lane.at(8 * frag0, 2 * k + 2));
          mma::m16n8k16<T>(sacc[0][pe], a0, b[0], b[1]);
          mma::m16n8k16<T>(sacc[1][pe], a0, b[2], b[3]);
          mma::m16n8k16<T>(sacc[0][pe], a1, b1[0], b1[1]);
          mma::m16n8k16<T>(sacc[1][pe], a1, b1[2], b1[3]);
        }
      }
#pragma unroll
      for (int u = 0; u < S::kUnitsPerWarp; ++u) {
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          v[i] = sacc[u][0][i] * nope_scale + (kKpe ? sacc[u][1][i] * pe_scale : 0.0f);
        float* at = s_buf + (kpart * S::kRows + rb_s * 16 + g) * S::kSStride + 8 * (frag0 + u) + 2 * t;
        *reinterpret_cast<float2*>(at) = make_float2(v[0], v[1]);
        *reinterpret_cast<float2*>(at + 8 * S::kSStride) = make_float2(v[2], v[3]);
      }
    }
    __syncthreads();

    // ---- online softmax of row block rb over the tile's keys, then O += P V.
    // s[j][e * 4 + h * 2 + x]: row g + 8h, key 16j + 8e + 2t + x: the A-fragment order.
    float s[2][8];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float2 x = make_float2(0.0f, 0.0f);
#pragma unroll
          for (int kp = 0; kp < S::kKParts; ++kp) {
            const float2 y = *reinterpret_cast<const float2*>(
                s_buf + (kp * S::kRows + rb * 16 + g + 8 * h) * S::kSStride + 16 * j + 8 * e + 2 * t);
            x.x += y.x;
            x.y += y.y;
          }
          s[j][e * 4 + h * 2] = x.x;
          s[j][e * 4 + h * 2 + 1] = x.y;
        }
    if (key0 + S::kKeys > full_end) {  // some row does not see every key of the tile
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int key = key0 + 16 * j + 8 * (i / 4) + 2 * t + (i & 1);
          if (key >= lim[(i / 2) & 1]) s[j][i] = -INFINITY;
        }
    }
    float base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = row_max[h];
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) mx = fmaxf(mx, fmaxf(s[j][e * 4 + h * 2], s[j][e * 4 + h * 2 + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      base[h] = mx == -INFINITY ? 0.0f : mx;  // a row that has seen no key yet keeps weights 0
      const float rescale = exp2_approx(row_max[h] - base[h]);
      row_max[h] = mx;
      row_sum[h] *= rescale;
#pragma unroll
      for (int n = 0; n < S::kOFrags; ++n) {
        acc[n][2 * h] *= rescale;
        acc[n][2 * h + 1] *= rescale;
      }
    }
    // P as the A operand, one fragment per 16 keys; each lane sums its own weights
    // (the row's four lanes are summed once, at the end).
    std::uint32_t a[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float w[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) w[i] = exp2_approx(s[j][i] - base[(i / 2) & 1]);
#pragma unroll
      for (int i = 0; i < 4; ++i) a[j][i] = mma::pack2<T>(w[2 * i], w[2 * i + 1]);
      row_sum[0] += (w[0] + w[1]) + (w[4] + w[5]);
      row_sum[1] += (w[2] + w[3]) + (w[6] + w[7]);
    }
    // V: the tile's first 512 columns, read transposed (lanes 0-15: keys 0-15 of
    // chunk c, lanes 16-31: of chunk c + 1).
    const SwizzledLane<S::kDqk> v_lane(kv, (lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int n = 0; n < S::kOFrags; n += 2) {
        std::uint32_t b[4];
        mma::ldmatrix_x4_trans(b, v_lane.at(16 * j, c0 + n));
        mma::m16n8k16<T>(acc[n], a[j], b[0], b[1]);
        mma::m16n8k16<T>(acc[n + 1], a[j], b[2], b[3]);
      }
  }
  ptx::cp_async_wait_all();  // an item without keys still has its q tile in flight

  // ---- epilogue: O / sum (times the value scale) and the LSE, as the output or as
  // this chunk's partial state.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
  const bool split = r.num_chunks > 1;
  const std::int64_t heads = p.num_heads.divisor;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = rb * 16 + g + 8 * h;
    if (row >= rows) continue;
    std::uint32_t head = 0;
    const std::int64_t token = p.num_heads.divmod(std::uint32_t(item.row_begin + row), &head);
    const bool empty = !(row_sum[h] > 0.0f);
    const float inv = empty ? 0.0f : p.v_scale / row_sum[h];
    const float lse = empty ? -INFINITY : row_max[h] + __log2f(row_sum[h]);
    if (split) {
      const std::int64_t state =
          (r.partial_begin + std::int64_t(item.chunk) * r.qo_len + token) * heads + head;
      float* po = p.partial_o + state * S::kDc + c0 * 8 + 2 * t;
#pragma unroll
      for (int n = 0; n < S::kOFrags; ++n) {
        *reinterpret_cast<float2*>(po + 8 * n) = make_float2(acc[n][2 * h] * inv, acc[n][2 * h + 1] * inv);
      }
      if (c0 == 0 && t == 0) p.partial_lse[state] = lse;
      continue;
    }
    const std::int64_t n_out = r.qo_begin + token;
    auto* po = reinterpret_cast<std::uint32_t*>(
        static_cast<char*>(p.o) + (n_out * p.o_stride_n + head * p.o_stride_h + c0 * 8 + 2 * t) * 2);
#pragma unroll
    for (int n = 0; n < S::kOFrags; ++n) {
      const float x = acc[n][2 * h] * inv, y = acc[n][2 * h + 1] * inv;
      po[4 * n] = p.o_bf16 ? mma::pack2<__nv_bfloat16>(x, y) : mma::pack2<__half>(x, y);
    }
    if (p.lse != nullptr && c0 == 0 && t == 0) {
      p.lse[n_out * p.lse_stride_n + head * p.lse_stride_h] = lse * p.lse_scale;
    }
  }
  discard_bad_item<S>(p, item, r, key_begin, key_end, rows, bad);
}

// One compiled kernel: its shared memory, set once as the kernel's limit (beyond the
// default 48 KiB).
template <class TQ, class TKV, int kRowBlocks, bool kKpe>
struct MlaKernel {
  static constexpr int kSmem = MlaSmem<TKV, kRowBlocks, kKpe>::bytes;
  static constexpr auto kernel = mla_kernel<TQ, TKV, kRowBlocks, kKpe>;
  static void prepare() {
    static const bool prepared = [] {
      KVINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      return true;
    }();
    (void)prepared;
  }
};

// Calls f(MlaKernel<...>{}) for the row blocks (items of 16, 32 or 64 rows) and the
// rotary part chosen at run time.
template <class TQ, class TKV, class F>
void with_mla_kernel(int row_blocks, bool kpe, F&& f) {
  const auto pick = [&]<int kRowBlocks>() {
    if (kpe) {
      f(MlaKernel<TQ, TKV, kRowBlocks, true>{});
    } else {
      f(MlaKernel<TQ, TKV, kRowBlocks, false>{});
    }
  };
  switch (row_blocks) {
    case 1:
      return pick.template operator()<1>();
    case 2:
      return pick.template operator()<2>();
    default:
      return pick.template operator()<4>();
  }
}

template <class TQ, class TKV>
void launch_mla(const MlaKernelParams& p, int row_blocks, bool kpe, std::int64_t grid, cudaStream_t stream) {
  with_mla_kernel<TQ, TKV>(row_blocks, kpe, [&](auto k) {
    using K = decltype(k);
    K::prepare();
    launch_after_previous(K::kernel, dim3(unsigned(grid)), dim3(256), std::size_t(K::kSmem), stream, false,
                          p);
  });
}

template <class TQ, class TKV>
int mla_occupancy(int row_blocks, bool kpe) {
  int blocks = 0;
  with_mla_kernel<TQ, TKV>(row_blocks, kpe, [&](auto k) {
    using K = decltype(k);
    K::prepare();
    KVINFER_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, K::kernel, 256, std::size_t(K::kSmem)));
  });
  return blocks;
}

#define KVINFER_INSTANTIATE_MLA(TQ, TKV)                                                            \
  template void launch_mla<TQ, TKV>(const MlaKernelParams&, int, bool, std::int64_t, cudaStream_t); \
  template int mla_occupancy<TQ, TKV>(int, bool);

}  // namespace kvinfer::cuda
