// SPDX-License-Identifier: Apache-2.0
// The decode tile for fp8 KV: the one-warp tile of tensor_core_tile/ (16 packed
// query rows against 16-key tiles, mma.sync m16n8k16) with K and V converted from
// fp8 to fp16 in registers, straight into mma fragments (the mma runs in fp16 for
// either query type: q_fragments_to_half says why that is as precise). The 16-bit
// path of tensor_core_tile/ stages fp8 tiles, converts them into a 16-bit copy in
// shared memory and reads that back with ldmatrix: for a memory-bound problem that
// round trip and its barriers cost more than the bytes fp8 saves (H200, 64 x 4k:
// 283 us against 250 us for bf16 KV). Here the raw tiles are the only copy, so four
// of them stay in flight in the same shared memory.
//
// Operand layouts without ldmatrix. A head-dim permutation applied to both Q and K
// leaves S = Q K^T unchanged, so k-step kk of S takes, for the lane with t = lane %
// 4, the physical dims p0 .. p0 + 3 with p0 = 64 (kk / 4) + 16 t + 4 (kk % 4) as its
// logical columns 2t, 2t + 1, 2t + 8, 2t + 9: one 16-byte load of a key row gives a
// lane four k-steps. For O += P V the output columns are permuted instead: n8
// fragment c of O holds dim C n + c in its column n (C = head_dim / 8 fragments), so
// the lane with g = lane / 4 reads dims [C g, C g + C) of its four key rows (one
// 16-byte load each for head_dim 128), pairs the rows' bytes with PRMT, and ends up
// owning the contiguous dims [2 t C, 2 t C + 2 C) of its rows of O.
// Runs 16-bit q with fp8 KV, head_dim_qk == head_dim_vo in {64, 128}, no RoPE (the
// selector keeps RoPE with fp8 off this tile) and none of the general logits.
#pragma once

#include <cuda_fp8.h>

#include <type_traits>
#include <utility>

#include "cuda/attention/tile/bad_item.cuh"
#include "cuda/attention/tile/decode_item_start.cuh"
#include "cuda/attention/tile/item_keys.cuh"
#include "cuda/attention/tile/item_warps.cuh"
#include "cuda/attention/tile/key_access.cuh"
#include "cuda/attention/tile/kv_copy.cuh"
#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/attention/tile/tile_threads.cuh"
#include "cuda/attention/tile/warp_timeline.cuh"
#include "cuda/check.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

template <int D>
struct DecodeFp8Shape {
  static constexpr int kThreads = 32;
  static constexpr int kRows = 16;    // packed query rows
  static constexpr int kKeys = 16;    // keys per tile
  static constexpr int kStages = 4;   // raw tiles in flight: 3 land while one is computed
  static constexpr int kQkSteps = D / 16;
  static constexpr int kVoFrags = D / 8;              // C
  static constexpr int kStageBytes = kKeys * 2 * D;   // K rows, then V rows, D bytes each
  // Shared memory: the Q tile (16-bit, swizzled chunks), then the raw KV stages.
  static constexpr int q = 0;
  static constexpr int kv = q + kRows * D * 2;
  static constexpr int bytes = kv + kStages * kStageBytes;
  static constexpr int kTileBytes = (bytes + 127) / 128 * 128;  // one item warp's share of a CTA's
};

// Byte offset of byte b of row `row` in a raw tile of D-byte rows. 16-byte units are
// XOR-swizzled within 128-byte lines by x(line) = (line & 6) ^ 4 (line & 1), so that
// both reads are free of bank conflicts: the K read (a quarter-warp takes rows g, g + 1
// at units t and 4 + t... of one or two lines: x differs in bit 2 between them) and
// the V read (rows 2t + e for t = 0..3 at units g in {0, 1}: x differs in bits 1-2).
template <int D>
__host__ __device__ constexpr int raw_offset(int row, int b) {
  const int lin = row * D + b, line = lin >> 7;
  return lin ^ ((((line & 6) ^ ((line & 1) << 2))) << 4);
}

// The swizzle depends on a line's three low bits only, so offsets repeat every 8 lines
// (kRawPeriodRows rows) shifted by 1024 bytes: a lane computes the swizzle of its
// first period once, before its tiles, and every other offset is that plus a constant
// (an immediate of the shared-memory access). Recomputed in every tile, the swizzles
// took 57 of the 406 instructions of a 16-key tile (paged, head_dim 128, sm_90a).
template <int D>
inline constexpr int kRawPeriodRows = 1024 / D;

template <int D>
constexpr bool raw_offsets_repeat() {
  for (int row = 0; row < 2 * kRawPeriodRows<D>; ++row)
    for (int b = 0; b < D; ++b)
      if (raw_offset<D>(row + kRawPeriodRows<D>, b) != raw_offset<D>(row, b) + 1024) return false;
  return true;
}
static_assert(raw_offsets_repeat<64>() && raw_offsets_repeat<128>());

// Within a 128-byte line, the upper 64 bytes' offsets are the lower's with bit 6 flipped
// (the line's swizzle is one XOR over bits 4-6).
template <int D>
constexpr bool raw_halves_flip() {
  for (int row = 0; row < kRawPeriodRows<D>; ++row)
    for (int b = 0; b < D; ++b)
      if (b % 128 < 64 && raw_offset<D>(row, b + 64) != (raw_offset<D>(row, b) ^ 64)) return false;
  return true;
}
static_assert(raw_halves_flip<128>());

// The shared-memory offsets of this lane's copies in a raw stage (copy_fp8_tile): step
// s writes rows s * kRowsPerStep + lane / kUnitsPerRow at unit lane % kUnitsPerRow.
template <int D, int kKeys, int kUnit>
struct RawCopyOffsets {
  static constexpr int kUnitBytes = kUnit;
  static constexpr int kUnitsPerRow = D / kUnit;
  static constexpr int kRowsPerStep = 32 / kUnitsPerRow;
  static constexpr int kSteps = kKeys / kRowsPerStep;
  static_assert(kRawPeriodRows<D> % kRowsPerStep == 0);
  static constexpr int kPeriodSteps = kRawPeriodRows<D> / kRowsPerStep;
  static constexpr int kBases = kPeriodSteps < kSteps ? kPeriodSteps : kSteps;
  int base[kBases];
  __device__ explicit RawCopyOffsets(int lane) {
#pragma unroll
    for (int s = 0; s < kBases; ++s)
      base[s] = raw_offset<D>(s * kRowsPerStep + lane / kUnitsPerRow, lane % kUnitsPerRow * kUnit);
  }
  __device__ int operator()(int step) const { return base[step % kPeriodSteps] + step / kPeriodSteps * 1024; }
};

// Issues the copies of key rows [key0, key0 + kKeys) of K and V into a raw stage in
// units of kUnit bytes (8, the alignment fp8 rows are guaranteed, or 16 when every
// row is 16-byte aligned); rows >= valid are zeros. Each copy instruction takes whole
// rows, D / kUnit lanes per row (4 rows of 128 bytes for head_dim 128 in 16-byte
// units): one L2 request per 128-byte line rather than one per 32-byte sector of 16
// rows, which on the H200 left the fp8 tile bound by L2 (87% busy at 68% of the DRAM
// bandwidth). The rows' pages come from `ahead`, looked up a tile before, by shuffle.
// Units land in the swizzled stage (128-byte aligned, V rows kKeys * D bytes after
// K's) at raw_offset.
template <int D, int kKeys, bool kPaged, int kUnit>
__device__ __forceinline__ void copy_fp8_tile(unsigned stage, const KeyLocator& locate, const KeyRow& k_row,
                                              const KeyRow& v_row, int key0, int valid, const PagesAhead<kKeys>& ahead,
                                              const RawCopyOffsets<D, kKeys, kUnit>& offsets, int lane) {
  constexpr int kUnitsPerRow = D / kUnit;
  static_assert(D <= 128 && 32 % kUnitsPerRow == 0, "whole rows of at most one 128-byte line per instruction");
  constexpr int kRowsPerStep = 32 / kUnitsPerRow;
  static_assert(kKeys % kRowsPerStep == 0);
  const int unit = lane % kUnitsPerRow;
  // The tile's rows on one page (its first slot leaves room for kKeys rows): one page
  // id and one address per tensor, then the rows' strides (as copy_key_rows does).
  if constexpr (kPaged) {
    std::uint32_t slot0;
    locate.page_size.divmod(std::uint32_t(key0), &slot0);
    if (slot0 + kKeys <= locate.page_size.divisor) {
      const KeySlot first{ahead.tile_page(), std::int64_t(slot0)};
      const int r0 = lane / kUnitsPerRow;
      const char* k_src = k_row(first) + r0 * k_row.stride_token + unit * kUnit;
      const char* v_src = v_row(first) + r0 * v_row.stride_token + unit * kUnit;
#pragma unroll
      for (int step = 0; step < kKeys / kRowsPerStep; ++step) {
        const int row = step * kRowsPerStep + r0;
        const bool ok = row < valid;
        const unsigned dst = stage + unsigned(offsets(step));
        ptx::cp_async_or_zero<kUnit>(dst, k_src + step * kRowsPerStep * k_row.stride_token, ok);
        ptx::cp_async_or_zero<kUnit>(dst + unsigned(kKeys * D), v_src + step * kRowsPerStep * v_row.stride_token, ok);
      }
      return;
    }
  }
#pragma unroll
  for (int step = 0; step < kKeys / kRowsPerStep; ++step) {
    const int row = step * kRowsPerStep + lane / kUnitsPerRow;
    const bool ok = row < valid;
    const int key = key0 + (ok ? row : 0);
    const KeySlot at = kPaged ? ahead.slot(locate, key, ok ? row : 0) : KeySlot{0, key};
    const unsigned dst = stage + unsigned(offsets(step));
    ptx::cp_async_or_zero<kUnit>(dst, k_row(at) + unit * kUnit, ok);
    ptx::cp_async_or_zero<kUnit>(dst + unsigned(kKeys * D), v_row(at) + unit * kUnit, ok);
  }
}

// The query tile's fragments as fp16, and the power of two q_scale they were
// multiplied by. The mma runs in fp16 whatever the query type: fp8 K and V convert
// to fp16 in one instruction (to bf16 in four), and fp16 operands are at least as
// precise as bf16 ones. A bf16 tile is scaled so that its largest magnitude lands in
// [2^14, 2^15): every element within 2^-38 of the largest keeps its value exactly
// (bf16's 8-bit significands fit fp16's 11), smaller ones are below anything the
// fp32 scores resolve. fp16 queries are used as they are (q_scale 1).
template <class TQ, int kSteps>
__device__ __forceinline__ float q_fragments_to_half(std::uint32_t (&qf)[kSteps][4]) {
  if constexpr (std::is_same_v<TQ, __half>) {
    return 1.0f;
  } else {
    float mx = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qf[kk][i]));
        mx = fmaxf(mx, fmaxf(fabsf(x.x), fabsf(x.y)));
      }
#pragma unroll
    for (int off = 16; off >= 1; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    int e = 0;
    frexpf(mx, &e);  // mx < 2^e (0 for a zero tile, inf/NaN: e unspecified but finite)
    const float q_scale = ldexpf(1.0f, min(max(15 - e, -126), 126));
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qf[kk][i]));
        qf[kk][i] = mma::pack2<__half>(x.x * q_scale, x.y * q_scale);
      }
    return q_scale;
  }
}

// Row g + 8 h of the tile's O in the accumulator layout of the epilogue (this lane's
// dims [2 t4 C, 2 t4 C + 2 C): o[c][2 h] dim 2 t4 C + c, o[c][2 h + 1] dim 2 t4 C + C
// + c), times norm, as floats from dst (the row's dim 2 t4 C).
template <int C>
__device__ __forceinline__ void store_row_f32(float* dst, const float (&o)[1][C][4], int h, float norm) {
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int c = 0; c < C; c += 4) {
      const int e = 2 * h + half;
      *reinterpret_cast<float4*>(dst + half * C + c) =
          make_float4(o[0][c][e] * norm, o[0][c + 1][e] * norm, o[0][c + 2][e] * norm, o[0][c + 3][e] * norm);
    }
}

// Whether every K and V row starts 16-byte aligned: then the copies take 16-byte units,
// half the copy instructions of 8-byte ones.
__device__ __forceinline__ bool fp8_rows_16_byte_aligned(const AttentionKernelParams& p) {
  return ((reinterpret_cast<std::uintptr_t>(p.kv.k.data) | reinterpret_cast<std::uintptr_t>(p.kv.v.data) |
           std::uintptr_t(p.kv.k.stride_page | p.kv.k.stride_token | p.kv.k.stride_head | p.kv.v.stride_page |
                          p.kv.v.stride_token | p.kv.v.stride_head)) &
          15u) == 0;
}

// The copies of one raw tile (copy_fp8_tile) into the stage at shared address dst: in
// 16-byte units where `wide` (fp8_rows_16_byte_aligned), else in 8-byte ones; paged or
// ragged as the item's keys are.
template <int D, int kKeys>
__device__ __forceinline__ void copy_fp8_stage(unsigned dst, const KeyLocator& locate, const KeyRow& k_row,
                                               const KeyRow& v_row, int key0, int valid,
                                               const PagesAhead<kKeys>& ahead, bool wide,
                                               const RawCopyOffsets<D, kKeys, 16>& wide_offsets,
                                               const RawCopyOffsets<D, kKeys, 8>& narrow_offsets, int lane) {
  const auto copy = [&](auto paged, const auto& offsets) {
    constexpr int kUnit = std::remove_cvref_t<decltype(offsets)>::kUnitBytes;
    copy_fp8_tile<D, kKeys, decltype(paged)::value, kUnit>(dst, locate, k_row, v_row, key0, valid, ahead,
                                                           offsets, lane);
  };
  if (locate.pages != nullptr) {
    wide ? copy(std::true_type{}, wide_offsets) : copy(std::true_type{}, narrow_offsets);
  } else {
    wide ? copy(std::false_type{}, wide_offsets) : copy(std::false_type{}, narrow_offsets);
  }
}

// Tiles 0 .. kStages - 2 behind Q (load(t): tile t's copies), one commit group per
// tile, empty or not, so that "all but the newest kStages - 1 groups" always means
// "tile t"; then the pages of tile kStages - 1, until Q has landed.
template <int kKeys, int kStages, bool kItemWarps, class Load>
__device__ __forceinline__ void load_first_fp8_tiles(const Load& load,
                                                     const DecodeItemStart<kKeys, kItemWarps>& start,
                                                     PagesAhead<kKeys>& ahead, int key_begin, int step,
                                                     int key_end, int num_tiles) {
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < num_tiles) {
      if (t > 0) {
        ahead.fetch(start.locate, key_begin + t * step, key_end);
      } else {
        start.recheck_pages(ahead, key_begin, step, key_end);
      }
      load(t);
    }
    ptx::cp_async_commit();
  }
  if (kStages - 1 < num_tiles) ahead.fetch(start.locate, key_begin + (kStages - 1) * step, key_end);
  ptx::cp_async_wait_group<kStages - 1>();  // Q
  tile_sync<kItemWarps>();
}

// Before tile t (keys from key0): tile t + kStages - 1 into the stage tile t - 1 used
// (released by the barrier that ended it) and the pages of tile t + kStages, until
// tile t has landed.
template <int kKeys, int kStages, bool kItemWarps, class Load>
__device__ __forceinline__ void wait_for_fp8_tile(const Load& load, PagesAhead<kKeys>& ahead,
                                                  const KeyLocator& locate, int t, int key0, int step,
                                                  int key_end, int num_tiles) {
  if (t + kStages - 1 < num_tiles) load(t + kStages - 1);
  if (t + kStages < num_tiles) ahead.fetch(locate, key0 + kStages * step, key_end);
  ptx::cp_async_commit();
  ptx::cp_async_wait_group<kStages - 1>();
  tile_sync<kItemWarps>();
}

// Q fragments for every k-step, in the permuted dims (see the top of the file): k-step
// kk of lane (g, t4) holds physical dims p0 .. p0 + 3 of rows g and g + 8.
template <int D>
__device__ __forceinline__ void load_fp8_q_fragments(std::uint32_t (&qf)[D / 16][4], const unsigned char* sq,
                                                     int g, int t4) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int p0 = 64 * (kk / 4) + 16 * t4 + 4 * (kk % 4);
    const uint2 lo = *reinterpret_cast<const uint2*>(sq + swizzled_chunk<D>(g, p0 / 8) * 16 + (p0 % 8) * 2);
    const uint2 hi = *reinterpret_cast<const uint2*>(sq + swizzled_chunk<D>(g + 8, p0 / 8) * 16 + (p0 % 8) * 2);
    qf[kk][0] = lo.x;
    qf[kk][1] = hi.x;
    qf[kk][2] = lo.y;
    qf[kk][3] = hi.y;
  }
}

// This lane's offsets in a raw stage: its K words (key 8 f + g, dims 64 blk + 16 t4)
// and its V rows (keys 2 t4 + (e & 1) + 8 (e >> 1), dims [C g, C g + C)).
// Rows 8 apart are a swizzle period apart at head_dim 128 (kRawPeriodRows), and the
// second 64 dims of a row flip bit 6 (raw_halves_flip): one swizzle for K's four.
template <int D>
__device__ __forceinline__ void fp8_lane_offsets(int (&k_off)[2][D / 64], int (&v_off)[4], int lane, int g,
                                                 int t4) {
  static_assert(D <= 128, "k_off[f][1] from k_off[f][0] holds within one 128-byte row");
  constexpr int C = D / 8;
  constexpr bool kEightRowsPeriodic = 8 % kRawPeriodRows<D> == 0;
#pragma unroll
  for (int f = 0; f < 2; ++f)
#pragma unroll
    for (int blk = 0; blk < D / 64; ++blk)
      k_off[f][blk] = blk > 0                       ? k_off[f][0] ^ (64 * blk)
                      : kEightRowsPeriodic && f > 0 ? k_off[0][0] + 8 * f * D
                                                    : raw_offset<D>(8 * f + g, 16 * t4);
  // ptxas would recompute the swizzle of the first offset in every tile from the lane's
  // g and t4 (both live) rather than hold it; a value that comes out of a shuffle it
  // holds.
  k_off[0][0] = __shfl_sync(0xffffffffu, k_off[0][0], lane);
#pragma unroll
  for (int e = 0; e < 4; ++e)
    v_off[e] = kEightRowsPeriodic && e >= 2 ? v_off[e - 2] + 8 * D : raw_offset<D>(2 * t4 + (e & 1) + 8 * (e >> 1), C * g);
}

// S = Q K^T of the raw tile kt: lane row g of n8 fragment f is key 8 f + g. Even and
// odd k-steps accumulate separately (four chains of dependent mma instead of two: with
// two warps per scheduler their latency is on the critical path) and are summed.
// Scaled here only where the scale is negative (prescale).
template <class TKV, int D>
__device__ __forceinline__ void fp8_scores(float (&s)[1][2][4], const unsigned char* kt,
                                           const int (&k_off)[2][D / 64],
                                           const std::uint32_t (&qf)[D / 16][4], bool prescale,
                                           float qk_scale_log2) {
  float s_odd[2][4];
#pragma unroll
  for (int f = 0; f < 2; ++f) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][f][e] = s_odd[f][e] = 0.0f;
#pragma unroll
    for (int blk = 0; blk < D / 64; ++blk) {
      const uint4 w = *reinterpret_cast<const uint4*>(kt + k_off[f][blk]);
      const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k4 = 0; k4 < 4; ++k4) {
        std::uint32_t b0, b1;
        fp8x4_to_half2x2<TKV>(words[k4], b0, b1);
        mma::m16n8k16<__half>(k4 % 2 ? s_odd[f] : s[0][f], qf[4 * blk + k4], b0, b1);
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][f][e] += s_odd[f][e];
  }
  if (prescale) {
#pragma unroll
    for (int f = 0; f < 2; ++f)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][f][e] *= qk_scale_log2;
  }
}

// O += P V of the raw tile vt: this lane's keys 2 t4, 2 t4 + 1, 2 t4 + 8, 2 t4 + 9 (its
// k of the B operand), bytes [C g, C g + C) of each; PRMT pairs the bytes of two keys.
template <class TKV, int D>
__device__ __forceinline__ void fp8_pv(float (&o)[1][D / 8][4], const float (&s)[1][2][4],
                                       const unsigned char* vt, const int (&v_off)[4]) {
  constexpr int kWords = D / 32;  // of a V row's C bytes
  std::uint32_t pa[4];
  p_fragment<__half>(s[0], 0, pa);
  std::uint32_t v[4][kWords];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const unsigned char* src = vt + v_off[e];
    if constexpr (kWords == 4) {
      const uint4 x = *reinterpret_cast<const uint4*>(src);
      v[e][0] = x.x, v[e][1] = x.y, v[e][2] = x.z, v[e][3] = x.w;
    } else {
      const uint2 x = *reinterpret_cast<const uint2*>(src);
      v[e][0] = x.x, v[e][1] = x.y;
    }
  }
#pragma unroll
  for (int w = 0; w < kWords; ++w) {
    const std::uint32_t lo01 = __byte_perm(v[0][w], v[1][w], 0x5140),
                        hi01 = __byte_perm(v[0][w], v[1][w], 0x7362);
    const std::uint32_t lo89 = __byte_perm(v[2][w], v[3][w], 0x5140),
                        hi89 = __byte_perm(v[2][w], v[3][w], 0x7362);
    std::uint32_t b[4][2];  // [fragment 4w + i][b0 / b1]
    fp8x4_to_half2x2<TKV>(lo01, b[0][0], b[1][0]);
    fp8x4_to_half2x2<TKV>(lo89, b[0][1], b[1][1]);
    fp8x4_to_half2x2<TKV>(hi01, b[2][0], b[3][0]);
    fp8x4_to_half2x2<TKV>(hi89, b[2][1], b[3][1]);
#pragma unroll
    for (int i = 0; i < 4; ++i) mma::m16n8k16<__half>(o[0][4 * w + i], pa, b[i][0], b[i][1]);
  }
}

// The epilogue. Lane (g, t4) holds dims [2 t4 C, 2 t4 C + 2 C) of rows g and g + 8:
// o[c][2h] is dim 2 t4 C + c of row g + 8h, o[c][2h + 1] dim 2 t4 C + C + c. Item warps
// leave their states in their KV stages (once no copy lands there) and the CTA merges
// them (item_warps.cuh); a one-warp CTA writes O and the LSE, or the item's partial
// state where its request has several chunks.
template <int D, bool kItemWarps>
__device__ __forceinline__ void finish_fp8_item(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                const detail::RequestInfo& r, const float (&o)[1][D / 8][4],
                                                const float (&row_max)[1][2], const float (&row_sum)[1][2],
                                                float sc, int rows, int group, unsigned char* smem_cta,
                                                unsigned char* smem, int g, int t4) {
  using S = DecodeFp8Shape<D>;
  constexpr int C = S::kVoFrags;
  if constexpr (kItemWarps) {
    static_assert(S::bytes - S::kv >= kWarpStateBytes<D>, "a warp's state fits in its KV stages");
    unsigned char* scratch = smem + S::kv;
    ptx::cp_async_wait_all();  // no copy still lands in the stages the state reuses
    tile_sync<kItemWarps>();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(row_sum[0][h]);
      const float norm = sum != 0.0f ? p.kv.v_scale / sum : 0.0f;
      store_row_f32<C>(warp_state_o<D>(scratch, g + 8 * h) + 2 * t4 * C, o, h, norm);
      if (t4 == 0) warp_state_lse<D>(scratch)[g + 8 * h] = sum != 0.0f ? row_max[0][h] * sc + __log2f(sum) : -INFINITY;
    }
    merge_item_warps<D>(
        p, item, r, rows, [&](int w) { return smem_cta + w * S::kTileBytes + S::kv; },
        [&](int i) { return packed_row(p, item, group, i); });
    return;
  }
  const bool split = r.num_chunks > 1;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sum = quad_sum(row_sum[0][h]);
    const int i = g + 8 * h;
    if (i >= rows) continue;
    const auto [tk, head] = packed_row(p, item, group, i);
    const float norm = sum != 0.0f ? p.kv.v_scale / sum : 0.0f;
    const float lse = sum != 0.0f ? row_max[0][h] * sc + __log2f(sum) : -INFINITY;
    if (split) {
      const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + tk;
      store_row_f32<C>(p.schedule.partial_o + (prow * p.heads.num_qo_heads + head) * D + 2 * t4 * C, o, h,
                       norm);
      if (t4 == 0) p.schedule.partial_lse[prow * p.heads.num_qo_heads + head] = lse;
    } else {
      const std::int64_t orow = r.qo_begin + tk;
      std::uint16_t* out = output_row(p.out, orow, head) + 2 * t4 * C;
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int c = 0; c < C; c += 8) {
          const int e = 2 * h + half;
          uint4 x;
          x.x = pack_output2(p.out, o[0][c][e] * norm, o[0][c + 1][e] * norm);
          x.y = pack_output2(p.out, o[0][c + 2][e] * norm, o[0][c + 3][e] * norm);
          x.z = pack_output2(p.out, o[0][c + 4][e] * norm, o[0][c + 5][e] * norm);
          x.w = pack_output2(p.out, o[0][c + 6][e] * norm, o[0][c + 7][e] * norm);
          ptx::st_v4(out + half * C + c, x);
        }
      if (t4 == 0 && p.out.lse) p.out.lse[orow * p.out.lse_stride_n + head * p.out.lse_stride_h] = lse;
    }
  }
}

// kItemWarps: the instance whose CTA runs one item on blockDim.x / 32 warps, each this
// tile over its share of the keys in its own shared memory (item_warps.cuh). The item
// starts as in the tensor-core family's one-warp tile (decode_item_start.cuh).
template <class TQ, class TKV, int D, bool kItemWarps>
__global__ void __launch_bounds__(kItemWarps ? 32 * kMaxItemWarps : 32, kItemWarps ? 1 : 8)
    decode_fp8_kernel(const __grid_constant__ AttentionKernelParams p) {
  using S = DecodeFp8Shape<D>;
  constexpr int kKeys = S::kKeys, kStages = S::kStages;
  const detail::WorkItem item = load_work_item(p.schedule.items + blockIdx.x);
  if (unused_item(item)) return;  // grid sized for the capacity
  WarpTimeline timeline(p);
  PagesAhead<kKeys> ahead;  // the pages of the next tile to load, one load ahead
  const DecodeItemStart<kKeys, kItemWarps> start(p, item, ahead);
  const int lane = tile_thread<kItemWarps>(), g = lane / 4, t4 = lane % 4;
  extern __shared__ __align__(128) unsigned char smem_cta[];
  // A bad page id: no key tile (tile/bad_item.cuh).
  const bool bad_page =
      kDeviceIndexChecks && any_bad_page<!kItemWarps>(p, item, item_page_missing(p, item, int(blockDim.x)), smem_cta);
  unsigned char* smem = kItemWarps ? smem_cta + int(threadIdx.x) / 32 * S::kTileBytes : smem_cta;
  const int rows = item.row_end - item.row_begin;
  const int group = p.heads.group_size;
  const ItemKeys keys = start.warp_keys(p, item);
  const int key_begin = keys.key_begin, key_end = keys.key_end;
  const int num_tiles = bad_page ? 0 : keys.num_tiles(kKeys);
  const int step = kItemWarps ? keys.tile_step(kKeys) : kKeys;  // tile t: key_begin + t * step

  if ((static_cast<unsigned>(__cvta_generic_to_shared(smem)) & 127u) != 0) __trap();
  unsigned char* sq = smem + S::q;
  load_tile16<32, S::kRows, D, SwizzledRows, kItemWarps>(
      sq, [&](int i) { return packed_q_row(p, item, start.r, group, i); }, rows);
  ptx::cp_async_commit();
  const ItemRows kv_rows = item_rows(p, item, 1);  // fp8: strides are bytes
  const auto stage_of = [&](int t) { return smem + S::kv + (t % kStages) * S::kStageBytes; };
  const bool wide = fp8_rows_16_byte_aligned(p);
  const RawCopyOffsets<D, kKeys, 16> wide_offsets(lane);
  const RawCopyOffsets<D, kKeys, 8> narrow_offsets(lane);
  const auto load_kv = [&](int t) {
    const int key0 = key_begin + t * step;
    copy_fp8_stage<D, kKeys>(static_cast<unsigned>(__cvta_generic_to_shared(stage_of(t))), start.locate,
                             kv_rows.k, kv_rows.v, key0, key_end - key0, ahead, wide, wide_offsets,
                             narrow_offsets, lane);
  };
  load_first_fp8_tiles<kKeys, kStages, kItemWarps>(load_kv, start, ahead, key_begin, step, key_end,
                                                   num_tiles);

  std::uint32_t qf[S::kQkSteps][4];
  load_fp8_q_fragments<D>(qf, sq, g, t4);
  const float q_scale = q_fragments_to_half<TQ>(qf);
  int k_off[2][D / 64], v_off[4];
  fp8_lane_offsets<D>(k_off, v_off, lane, g, t4);
  int tok[1][2];  // the tokens of the lane's rows g and g + 8 (for mask_scores)
#pragma unroll
  for (int h = 0; h < 2; ++h)
    tok[0][h] = int(p.heads.group_div.div(std::uint32_t(item.row_begin + min(g + 8 * h, rows - 1))));
  // As in the tensor-core tile: the base-2 scale (here also undoing q_scale, exactly) folds
  // into the exponent unless it is negative.
  const float qk_scale_log2 = p.logits.sm_scale_log2 / q_scale;
  const bool prescale = qk_scale_log2 < 0.0f;
  const float sc = prescale ? 1.0f : qk_scale_log2;
  float o[1][S::kVoFrags][4], row_max[1][2], row_sum[1][2];
  zero_softmax_state(o, row_max, row_sum);

  for (int t = 0; t < num_tiles; ++t) {
    const int key0 = key_begin + t * step;
    timeline.tile(t, num_tiles);
    wait_for_fp8_tile<kKeys, kStages, kItemWarps>(load_kv, ahead, start.locate, t, key0, step, key_end,
                                                  num_tiles);
    const unsigned char* kt = stage_of(t);  // K rows, then V rows
    const unsigned char* vt = kt + kKeys * D;
    float s[1][2][4];
    fp8_scores<TKV, D>(s, kt, k_off, qf, prescale, qk_scale_log2);
    if (keys.needs_mask(key0, kKeys)) mask_scores<false>(s, keys.mask, tok, key0, key_end, lane);
    float rescale[1][2];
    if (online_softmax(s, row_max, row_sum, rescale, sc)) rescale_rows(o, rescale);
    fp8_pv<TKV, D>(o, s, vt, v_off);
    tile_sync<kItemWarps>();  // the stage is refilled by the next iteration
  }
  timeline.tile(num_tiles, num_tiles);
  finish_fp8_item<D, kItemWarps>(p, item, start.r, o, row_max, row_sum, sc, rows, group, smem_cta, smem,
                                     g, t4);
  if (bad_page) mark_bad_chunk<!kItemWarps>(p, item, start.r, rows);
}

template <class TQ, class TKV, int D, bool kItemWarps_ = false>
struct DecodeFp8Kernel {
  static constexpr int kThreads = 32;  // of one tile (of one item warp with kItemWarps)
  static constexpr int kSmem = DecodeFp8Shape<D>::bytes;
  static constexpr auto kernel = decode_fp8_kernel<TQ, TKV, D, kItemWarps_>;
  static constexpr bool kItemWarps = kItemWarps_;
  static constexpr int kTileSmem = DecodeFp8Shape<D>::kTileBytes;
  static int max_item_warps() { return kItemWarps ? item_warps_fitting(kTileSmem) : 1; }
  static void prepare() {
    const int bytes = kItemWarps ? max_item_warps() * kTileSmem : kSmem;
    KVINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
};

}  // namespace kvinfer::cuda
