// SPDX-License-Identifier: Apache-2.0
// The key-row decode tile: decode on tensor cores with the keys as the mma's M
// dimension, S^T = K Q^T and O^T = V^T P^T, for items of up to 8 packed query rows
// (one token of a head group of up to 8). The rows are the mma's N dimension (8), so
// a 16-key tile costs D/16 mma for S and D/16 for O, and O^T takes D/4 accumulators
// per lane where the 16-row tile (tensor_core_tile/, rows as M) takes D/2: at
// head_dim 256 that is 64 registers instead of 128, which the 16-row tile cannot
// spare (head_dim 256 ran on the CUDA-core kernel at 0.54 of the read bandwidth).
// One warp per CTA, or W item warps (item_warps.cuh) that take the item's tiles in
// turn and merge their states in the CTA; 16-bit KV of the query's type; plain logits
// (the selector keeps RoPE, ALiBi and the soft cap on the CUDA-core kernel). K/V
// stream in 16-key tiles through two shared-memory stages per warp (cp.async), pages
// looked up ahead (PagesAhead).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/bad_item.cuh"
#include "cuda/attention/tile/decode_item_start.cuh"
#include "cuda/attention/tile/item_keys.cuh"
#include "cuda/attention/tile/item_warps.cuh"
#include "cuda/attention/tile/key_access.cuh"
#include "cuda/attention/tile/kv_copy.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/attention/tile/warp_timeline.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

// Shared memory of one tile: Q (8 rows), two K stages, two V stages, each in the
// swizzled row layout that ldmatrix reads without bank conflicts. The output is
// staged in the K stages at the end.
template <int D>
struct DecodeKqTile {
  static constexpr int kRows = 8;        // packed query rows: the mma's N
  static constexpr int kKeys = 16;       // keys per tile: the mma's M
  static constexpr int kSteps = D / 16;  // k-steps of S^T, 16-dim tiles of O^T
  static constexpr int q = 0;
  static constexpr int stage = kKeys * D * 2;  // bytes of one K or V tile
  static constexpr int k = q + kRows * D * 2;
  static constexpr int v = k + 2 * stage;
  static constexpr int bytes = v + 2 * stage;
  static constexpr int kTileBytes = (bytes + 127) / 128 * 128;  // one item warp's share of a CTA's
  static constexpr int kOutStride = D + 4;  // floats per staged output row (conflict-free stores)
  static_assert(kRows * kOutStride * 4 + kRows * 4 <= 2 * stage, "the staged output fits in the K stages");
  static_assert(kRows <= kStateRows && kWarpStateBytes<D> <= 4 * stage, "an item warp's state fits in its stages");
};

// The warp's K/V tiles in its two stages: tile t (keys [key_begin + t * step, +
// kKeys)) lands in stage t % 2, and the page of tile t + 1 is fetched after tile t's
// copies.
template <class T, int D, bool kItemWarps>
struct KqStages {
  using L = DecodeKqTile<D>;
  using Start = DecodeItemStart<L::kKeys, kItemWarps>;
  unsigned char* smem;
  KeyLocator locate;
  KeyRow k_row, v_row;
  int key_begin, key_end, step, num_tiles;
  __device__ __forceinline__ void load(int t, PagesAhead<L::kKeys>& ahead) const {
    const int key0 = key_begin + t * step, stage = t & 1;
    load_kv_tile<T, 32, L::kKeys, D, D, kItemWarps>(smem + L::k + stage * L::stage,
                                                    smem + L::v + stage * L::stage, locate, k_row, v_row,
                                                    key0, key_end - key0, &ahead);
    if (t + 1 < num_tiles) ahead.fetch(locate, key0 + step, key_end);
  }
  // Tiles 0 and 1 behind Q, one commit group each (empty or not), until Q and tile 0
  // have landed.
  __device__ __forceinline__ void load_first(const Start& start, PagesAhead<L::kKeys>& ahead) const {
    if (num_tiles > 0) {
      start.recheck_pages(ahead, key_begin, step, key_end);
      load(0, ahead);
    }
    ptx::cp_async_commit();
    if (num_tiles > 1) load(1, ahead);
    ptx::cp_async_commit();
    ptx::cp_async_wait_group<1>();  // Q and tile 0
    __syncwarp();
  }
  // After tile t: its stage refilled with tile t + 2, until tile t + 1 has landed.
  __device__ __forceinline__ void refill(int t, PagesAhead<L::kKeys>& ahead) const {
    __syncwarp();  // every lane is done with this stage before tile t + 2 refills it
    if (t + 2 < num_tiles) load(t + 2, ahead);
    ptx::cp_async_commit();
    ptx::cp_async_wait_group<1>();  // tile t + 1
    __syncwarp();
  }
};

// Q as the B operand of S^T (n = row lane / 4, k = dims 2 (lane % 4) + {0, 1} and + 8),
// held in registers for the whole item: ldmatrix of rows lane % 8, chunks 2 ks + lane / 8.
template <int D>
__device__ __forceinline__ void load_kq_q_fragments(std::uint32_t (&qf)[D / 16][2], const unsigned char* sq,
                                                    int lane) {
  const SwizzledLane<D> q_lane(sq, lane % 8, (lane / 8) % 2);
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) mma::ldmatrix_x2(qf[ks], q_lane.at(0, 2 * ks));
}

// S^T = K Q^T of the tile in stage `off`: keys g and g + 8 of rows 2 t4, 2 t4 + 1. Even
// and odd k-steps accumulate separately (two chains of dependent mma instead of one).
// Scores stay raw unless the scale is negative (prescale). Keys past the item's end
// (zero-filled by the copies) score -inf.
template <class T, int D>
__device__ __forceinline__ void kq_scores(float (&s)[4], const SwizzledLane<D>& k_lane,
                                          const std::uint32_t (&qf)[D / 16][2], unsigned off,
                                          const AttentionKernelParams& p, bool prescale, int key0,
                                          int key_end, int g) {
  constexpr int kKeys = DecodeKqTile<D>::kKeys;
  float s_odd[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    std::uint32_t a[4];
    mma::ldmatrix_x4(a, k_lane.at(0, 2 * ks, off));
    mma::m16n8k16<T>(ks % 2 ? s_odd : s, a, qf[ks][0], qf[ks][1]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) s[e] = (s[e] + s_odd[e]) * (prescale ? p.logits.sm_scale_log2 : 1.0f);
  if (key0 + kKeys > key_end) {
    if (key0 + g >= key_end) s[0] = s[1] = -INFINITY;
    if (key0 + g + 8 >= key_end) s[2] = s[3] = -INFINITY;
  }
}

// Online softmax of the tile per row (base 2, the scale sc in the exponent): the
// lane's two rows' maxima (scaled) and its share of their sums (its keys only; summed
// over the row's lanes at the end). The maximum over the tile's keys sits in the 8
// lanes of equal lane % 4. Leaves the probabilities in s and the rows' rescale
// factors; returns whether any of the warp's differs from 1.
__device__ __forceinline__ bool kq_online_softmax(float (&s)[4], float (&row_max)[2], float (&row_sum)[2],
                                                  float (&rescale)[2], float sc) {
  float mx[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 4));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 8));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 16));
  }
  float base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float m_new = fmaxf(row_max[h], mx[h] * sc);
    base[h] = m_new == -INFINITY ? 0.0f : m_new;  // no key seen yet: every weight is 0
    rescale[h] = exp2_approx(row_max[h] - base[h]);
    row_max[h] = m_new;
  }
  const float p0 = exp2_approx(fmaf(s[0], sc, -base[0])), p1 = exp2_approx(fmaf(s[1], sc, -base[1]));
  const float p2 = exp2_approx(fmaf(s[2], sc, -base[0])), p3 = exp2_approx(fmaf(s[3], sc, -base[1]));
  row_sum[0] = row_sum[0] * rescale[0] + (p0 + p2);
  row_sum[1] = row_sum[1] * rescale[1] + (p1 + p3);
  s[0] = p0, s[1] = p1, s[2] = p2, s[3] = p3;
  // A row's maximum rarely moves after the first tiles: the rescale is skipped then.
  return __any_sync(0xffffffffu, rescale[0] != 1.0f || rescale[1] != 1.0f);
}

// O^T rows times their rescale factors (row 2 t4 in c[0], c[2], row 2 t4 + 1 in c[1], c[3]).
template <int kSteps>
__device__ __forceinline__ void rescale_kq_rows(float (&o)[kSteps][4], const float (&rescale)[2]) {
#pragma unroll
  for (int m = 0; m < kSteps; ++m) {
    o[m][0] *= rescale[0];
    o[m][2] *= rescale[0];
    o[m][1] *= rescale[1];
    o[m][3] *= rescale[1];
  }
}

// O^T += V^T P^T of the tile in stage `off`, P^T as the B operand (k = keys 2 t4 +
// {0, 1} and + 8, n = row g): the transposes of the probability fragments of keys
// 0-7 and 8-15.
template <class T, int D>
__device__ __forceinline__ void kq_pv(float (&o)[D / 16][4], const float (&pr)[4],
                                      const SwizzledLane<D>& v_lane, unsigned off) {
  const std::uint32_t pb0 = mma::movmatrix_trans(mma::pack2<T>(pr[0], pr[1]));
  const std::uint32_t pb1 = mma::movmatrix_trans(mma::pack2<T>(pr[2], pr[3]));
#pragma unroll
  for (int m = 0; m < D / 16; ++m) {
    std::uint32_t a[4];
    mma::ldmatrix_x4_trans(a, v_lane.at(0, 2 * m, off));
    mma::m16n8k16<T>(o[m], a, pb0, pb1);
  }
}

// The lane's rows of O^T (times norm) and their base-2 LSEs as [row][dim] floats,
// kStride floats a row: o[m][e] is dim 16 m + g + 8 (e / 2) of row 2 t4 + e % 2.
template <int kStride, int kSteps>
__device__ __forceinline__ void stage_kq_state(float* so, float* slse, const float (&o)[kSteps][4],
                                               const float (&row_max)[2], const float (&row_sum)[2],
                                               const float (&norm)[2], int g, int t4) {
#pragma unroll
  for (int m = 0; m < kSteps; ++m) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = 2 * t4 + e % 2, dim = 16 * m + g + 8 * (e / 2);
      so[row * kStride + dim] = o[m][e] * norm[e % 2];
    }
  }
  if (g == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) slse[2 * t4 + h] = row_sum[h] != 0.0f ? row_max[h] + __log2f(row_sum[h]) : -INFINITY;
  }
}

// The staged rows (stage_kq_state) written out in rows of 8-element pieces: the
// output, or the item's partial state where its request has several chunks.
template <int D>
__device__ __forceinline__ void write_kq_rows(const AttentionKernelParams& p, const detail::WorkItem& item,
                                              const detail::RequestInfo& r, const float* so,
                                              const float* slse, int rows, int group, int lane) {
  constexpr int kStride = DecodeKqTile<D>::kOutStride;
  const bool split = r.num_chunks > 1;
  constexpr int kPieces = D / 8;
  for (int u = lane; u < rows * kPieces; u += 32) {
    const int i = u / kPieces, e = (u % kPieces) * 8;
    const float* src = so + i * kStride + e;
    const float4 x0 = *reinterpret_cast<const float4*>(src), x1 = *reinterpret_cast<const float4*>(src + 4);
    const PackedRow row = packed_row(p, item, group, i);
    if (split) {
      const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + row.token;
      float* po = p.schedule.partial_o + (prow * p.heads.num_qo_heads + row.head) * D + e;
      *reinterpret_cast<float4*>(po) = x0;
      *reinterpret_cast<float4*>(po + 4) = x1;
      if (e == 0) p.schedule.partial_lse[prow * p.heads.num_qo_heads + row.head] = slse[i];
    } else {
      const std::int64_t orow = r.qo_begin + row.token;
      const float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      *reinterpret_cast<uint4*>(output_row(p.out, orow, row.head) + e) = pack_output8(p.out, x, 1.0f);
      if (e == 0 && p.out.lse) p.out.lse[orow * p.out.lse_stride_n + row.head * p.out.lse_stride_h] = slse[i];
    }
  }
}

// The epilogue: each row's sum over its 8 lanes, then O (normalised, times v_scale)
// and the LSE staged in the K stages, once no copy lands there any more. Item warps
// leave their states there in the layout of item_warps.cuh and the CTA merges them;
// a one-warp CTA writes its staged rows.
template <int D, bool kItemWarps>
__device__ __forceinline__ void finish_kq_item(const AttentionKernelParams& p, const detail::WorkItem& item,
                                               const detail::RequestInfo& r, const float (&o)[D / 16][4],
                                               const float (&row_max)[2], float (&row_sum)[2], int rows,
                                               int group, unsigned char* smem_cta, unsigned char* smem,
                                               int lane, int g, int t4) {
  using L = DecodeKqTile<D>;
  ptx::cp_async_wait_all();
  __syncwarp();
  float norm[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    sum += __shfl_xor_sync(0xffffffffu, sum, 8);
    sum += __shfl_xor_sync(0xffffffffu, sum, 16);
    row_sum[h] = sum;
    norm[h] = sum != 0.0f ? p.kv.v_scale / sum : 0.0f;
  }
  if constexpr (kItemWarps) {
    unsigned char* scratch = smem + L::k;
    stage_kq_state<D>(warp_state_o<D>(scratch, 0), warp_state_lse<D>(scratch), o, row_max, row_sum, norm, g,
                      t4);
    merge_item_warps<D>(
        p, item, r, rows, [&](int w) { return smem_cta + w * L::kTileBytes + L::k; },
        [&](int i) { return packed_row(p, item, group, i); });
  } else {
    float* so = reinterpret_cast<float*>(smem + L::k);
    float* slse = so + L::kRows * L::kOutStride;
    stage_kq_state<L::kOutStride>(so, slse, o, row_max, row_sum, norm, g, t4);
    __syncwarp();
    write_kq_rows<D>(p, item, r, so, slse, rows, group, lane);
  }
}

// One warp per CTA, or with kItemWarps one of the CTA's item warps (item_warps.cuh).
template <class T, int D, bool kItemWarps>
__global__ void __launch_bounds__(kItemWarps ? 32 * kMaxItemWarps : 32)
    decode_kq_kernel(const __grid_constant__ AttentionKernelParams p) {
  using L = DecodeKqTile<D>;
  constexpr int kKeys = L::kKeys;
  extern __shared__ __align__(128) unsigned char smem_cta[];
  const detail::WorkItem item = load_work_item(p.schedule.items + blockIdx.x);
  if (unused_item(item)) return;  // grid sized for the capacity
  WarpTimeline timeline(p);
  PagesAhead<kKeys> ahead;  // the pages of the warp's next tile to load
  const DecodeItemStart<kKeys, kItemWarps> start(p, item, ahead);
  // A bad page id: no key tile (tile/bad_item.cuh).
  const bool bad_page =
      kDeviceIndexChecks && any_bad_page<!kItemWarps>(p, item, item_page_missing(p, item, int(blockDim.x)), smem_cta);
  const int lane = int(threadIdx.x) % 32, g = lane / 4, t4 = lane % 4;
  unsigned char* smem = kItemWarps ? smem_cta + int(threadIdx.x) / 32 * L::kTileBytes : smem_cta;
  const int rows = item.row_end - item.row_begin;
  const int group = p.heads.group_size;
  // Decode items hold one token per request, so every row sees the same keys: the
  // only mask is the end of the last tile. Item warps take tiles w, w + W, ...
  const ItemKeys keys = start.warp_keys(p, item);
  const int key_begin = keys.key_begin, key_end = keys.key_end;
  const int num_tiles = bad_page ? 0 : keys.num_tiles(kKeys);
  const int step = keys.tile_step(kKeys);  // tile t: keys [key_begin + t * step, + kKeys)

  // The swizzled addressing (SwizzledLane) needs 128-byte aligned tiles.
  if ((static_cast<unsigned>(__cvta_generic_to_shared(smem)) & 127u) != 0) __trap();
  unsigned char* sq = smem + L::q;
  load_tile16<32, L::kRows, D, SwizzledRows, kItemWarps>(
      sq, [&](int i) { return packed_q_row(p, item, start.r, group, i); }, rows);
  ptx::cp_async_commit();
  const ItemRows kv_rows = item_rows(p, item, sizeof(T));
  const KqStages<T, D, kItemWarps> stages{smem,      start.locate, kv_rows.k, kv_rows.v,
                                          key_begin, key_end,      step,      num_tiles};
  stages.load_first(start, ahead);

  std::uint32_t qf[L::kSteps][2];
  load_kq_q_fragments<D>(qf, sq, lane);
  // Scores stay raw and the base-2 scale is folded into the exponent, unless it is
  // negative (a negative k_scale), which would turn the maximum into a minimum.
  const bool prescale = p.logits.sm_scale_log2 < 0.0f;
  const float sc = prescale ? 1.0f : p.logits.sm_scale_log2;
  // K as the A operand of S^T (rows = keys lane % 16, chunk + lane / 16); V^T as the A
  // operand of O^T, read transposed (keys lane % 8 + 8 (lane / 16), chunk + (lane / 8) % 2).
  const SwizzledLane<D> k_lane(smem + L::k, lane % 16, lane / 16);
  const SwizzledLane<D> v_lane(smem + L::v, lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
  // O^T: tile m, c[0..3] = dims 16 m + g (+ 8 for c[2], c[3]) of rows 2 t4 (c[0], c[2])
  // and 2 t4 + 1 (c[1], c[3]).
  float o[L::kSteps][4];
#pragma unroll
  for (int m = 0; m < L::kSteps; ++m) o[m][0] = o[m][1] = o[m][2] = o[m][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  for (int t = 0; t < num_tiles; ++t) {
    const int key0 = key_begin + t * step;
    timeline.tile(t, num_tiles);
    const unsigned off = unsigned((t & 1) * L::stage);
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    kq_scores<T, D>(s, k_lane, qf, off, p, prescale, key0, key_end, g);
    float rescale[2];
    if (kq_online_softmax(s, row_max, row_sum, rescale, sc)) rescale_kq_rows(o, rescale);
    kq_pv<T, D>(o, s, v_lane, off);
    stages.refill(t, ahead);
  }
  timeline.tile(num_tiles, num_tiles);
  finish_kq_item<D, kItemWarps>(p, item, start.r, o, row_max, row_sum, rows, group, smem_cta, smem, lane,
                                    g, t4);
  if (bad_page) mark_bad_chunk<!kItemWarps>(p, item, start.r, rows);
}

// Launch, occupancy and item warps of the tile (dynamic shared memory above 48 KiB
// allowed once per instance: one tile's, or the most item warps').
template <class T, int D>
struct DecodeKqKernel {
  using L = DecodeKqTile<D>;
  static constexpr auto kernel = decode_kq_kernel<T, D, false>;
  static constexpr auto item_warps_kernel = decode_kq_kernel<T, D, true>;
  // Item warps at head_dim 64: with them this tile is 5% faster than the 16-row tile
  // at 64 x 4k, without them 2% slower (H200). At 256 they measured slower (1 x 32k:
  // 71.4 -> 72.9 us), so its items keep one warp each.
  static int max_item_warps() { return D == 256 ? 1 : item_warps_fitting(L::kTileBytes); }
  // Shared memory of a one-warp CTA. At head_dim 128, where the 16-row tile plans (8
  // warps per multiprocessor), it is padded so that 8 one-warp CTAs fit and a ninth
  // does not: by registers alone 12 would, and a plan of one wave would not be one.
  static int one_warp_bytes() {
    if constexpr (D != 128) {
      return L::bytes;
    } else {
      static const int bytes = [] {
        int device = 0, per_sm = 0, reserved = 0;
        KVINFER_CUDA_CHECK(cudaGetDevice(&device));
        KVINFER_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
        KVINFER_CUDA_CHECK(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
        return std::max<int>(L::bytes, per_sm / 9 + 1 - reserved);
      }();
      return bytes;
    }
  }
  static void prepare() {
    static const bool done = [] {
      KVINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, one_warp_bytes()));
      KVINFER_CUDA_CHECK(cudaFuncSetAttribute(item_warps_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              max_item_warps() * L::kTileBytes));
      return true;
    }();
    (void)done;
  }
  static void launch(const AttentionKernelParams& p, std::int64_t grid, cudaStream_t stream) {
    prepare();
    const dim3 blocks(static_cast<unsigned>(grid));
    if (p.item_warps > 1) {
      launch_after_previous(item_warps_kernel, blocks, 32 * p.item_warps, p.item_warps * L::kTileBytes, stream,
                            p.programmatic, p);
    } else {
      launch_after_previous(kernel, blocks, 32, one_warp_bytes(), stream, p.programmatic, p);
    }
  }
  // Warp slots per multiprocessor (item_warps.cuh).
  static int occupancy() {
    prepare();
    return item_warp_slots(kernel, one_warp_bytes(), item_warps_kernel, max_item_warps(), L::kTileBytes);
  }
};

}  // namespace kvinfer::cuda
