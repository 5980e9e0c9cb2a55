// SPDX-License-Identifier: Apache-2.0
// fp8 latent tiles read straight into mma fragments. A tile of fp8 KV stays in the
// shared memory it was copied to (the raw tile) and is the only copy: each warp converts
// the bytes it reads to fp16 in registers (one cvt per pair, exact), so there is no
// conversion pass, no 16-bit copy of the tile and no barrier between them. For a
// memory-bound item (16 heads) that pass and its barrier lengthened the chain of every
// tile by more than the halved bytes saved (H200, 128 x 4k, 16 heads: 211 us for e4m3
// against 170 us for bf16; 171 us without the pass, the same as bf16: both are then
// bound by the SM's shared-memory pipe, docs/kernels.md, "MLA").
//
// Operand orders without ldmatrix (the fp8 decode tile's, fp8_decode_tile/kernel.cuh,
// on MLA's tiles):
//  - S = Q K^T: a permutation of the head dims applied to both Q and K leaves S as it is.
//    In each group of 32 dims, k-step kk of lane t takes physical dims p0 .. p0 + 3 with
//    p0 = 32 (kk / 2) + 8 t + 4 (kk % 2) as its logical columns 2t, 2t + 1, 2t + 8,
//    2t + 9: one 8-byte load of a key row gives a lane two k-steps. The q tile is stored
//    in that logical order (mla_q_to_fp8_operand), so ldmatrix reads Q as before.
//  - O += P V: the output columns are permuted instead. With C = kOFrags and pieces of
//    W = min(C, 16) bytes, column n of n8 fragment c holds dim
//    col0 + 8 W (c / W) + W n + c % W: the lane with g = lane / 4 reads C bytes of each
//    of its four key rows (2t, 2t + 1, 2t + 8, 2t + 9 of the k-step), pairs the rows'
//    bytes with PRMT, and ends up owning runs of 2W contiguous dims of its rows of O
//    (mla_store_rows with kFp8Columns).
// The raw tile: ckv rows of 512 bytes, then kpe rows of 64, both with 16-byte chunks
// XOR-swizzled (MlaRawTile) so that both reads are free of bank conflicts.
// Included by mla_kernel.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/mla/mla_scores.cuh"

namespace kvinfer::cuda {

// Byte offsets in a raw fp8 tile of S::kKeys key rows: ckv [kKeys][512], then kpe
// [kKeys][64]. Chunk c of a ckv row r sits at chunk c ^ ckv_swizzle(r) (bits 1-2 of the
// chunk, within its 128-byte line):
//  - the K read (8 consecutive rows, 32 bytes each at one logical offset) puts each
//    32-byte slot of the line under two rows: two wavefronts for 256 bytes;
//  - the V read (rows 2t (+1) for t = 0..3, W-byte pieces at one logical offset) puts
//    rows 0 and 2, 4 and 6 in opposite halves of the line.
// kpe rows (two per 128-byte line) flip bit 1 of the chunk every other row pair, so
// that the K read's 8 rows again fill the line's four 32-byte slots twice.
template <class S>
struct MlaRawTile {
  static constexpr int kCkvRowBytes = S::kDc;
  static constexpr int kKpeRowBytes = S::kDqk - S::kDc;
  static constexpr int kCkvBytes = S::kKeys * kCkvRowBytes;
  static constexpr int kBytes = S::kKeys * S::kDqk;
  __host__ __device__ static constexpr int ckv_swizzle(int row) {
    return (((row >> 1) & 1) << 2) | (((row >> 2) & 1) << 1);
  }
  __host__ __device__ static constexpr int kpe_swizzle(int row) { return ((row >> 1) & 1) << 1; }
  // 16-byte chunk c of the 576-byte key row `row` (ckv's 32 chunks, then kpe's 4).
  __host__ __device__ static constexpr int chunk_offset(int row, int c) {
    return c < kCkvRowBytes / 16 ? row * kCkvRowBytes + ((c ^ ckv_swizzle(row)) << 4)
                                 : kCkvBytes + row * kKpeRowBytes + (((c - kCkvRowBytes / 16) ^ kpe_swizzle(row)) << 4);
  }
};

// The q tile in the logical dim order of the fp8 S read, as fp16: a bf16 query times
// the power of two q_scale that puts its largest magnitude in [2^14, 2^15) (every
// element within 2^-38 of the largest keeps its value exactly: bf16's 8-bit
// significands fit fp16's 11; smaller ones are below anything the fp32 logits
// resolve, as the fp8 decode tile argues), an fp16 query as it is. In each 32-dim
// group of a row, physical word (dim pair) 4t + 2m + b goes to logical word
// 8m + 4b + t. Returns q_scale; `scratch` holds a float per warp. Ends with a barrier.
template <class TQ, class S>
__device__ __forceinline__ float mla_q_to_fp8_operand(unsigned char* q_tile, float* scratch) {
  constexpr int kGroups = S::kDqk / 32;  // 32-dim groups of a row: four 16-byte chunks each
  float q_scale = 1.0f;
  if constexpr (!std::is_same_v<TQ, __half>) {
    static_assert(std::is_same_v<TQ, __nv_bfloat16>);
    constexpr int kWords = S::kRows * S::kDqk / 2;  // bf16 pairs, in any order
    const auto* words = reinterpret_cast<const std::uint32_t*>(q_tile);
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
    q_scale = ldexpf(1.0f, min(max(15 - e, -126), 126));
  }
  for (int i = int(threadIdx.x); i < S::kRows * kGroups; i += S::kThreads) {
    const int row = i / kGroups, grp = i % kGroups;
    uint4* const chunk = reinterpret_cast<uint4*>(q_tile) + row * (S::kDqk / 8);
    std::uint32_t phys[16];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const uint4 v = chunk[(4 * grp + c) ^ (row & 7)];
      phys[4 * c] = v.x, phys[4 * c + 1] = v.y, phys[4 * c + 2] = v.z, phys[4 * c + 3] = v.w;
    }
    if constexpr (!std::is_same_v<TQ, __half>) {
#pragma unroll
      for (int w = 0; w < 16; ++w) {
        const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&phys[w]));
        phys[w] = mma::pack2<__half>(x.x * q_scale, x.y * q_scale);
      }
    }
    std::uint32_t logical[16];
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int b = 0; b < 2; ++b) logical[8 * m + 4 * b + t] = phys[4 * t + 2 * m + b];
#pragma unroll
    for (int c = 0; c < 4; ++c)
      chunk[(4 * grp + c) ^ (row & 7)] =
          make_uint4(logical[4 * c], logical[4 * c + 1], logical[4 * c + 2], logical[4 * c + 3]);
  }
  __syncthreads();
  return q_scale;
}

// A lane's offsets in a raw tile, computed once per item.
//  - k[j]: its K word pair of 32-dim group G = 4 i + j (i any) in key fragment 0 (row g):
//    add 128 i for the group, 8 * 512 per fragment. kpe[j]: of the kpe groups 16 + j.
//  - v: its first V piece (row 2t, dims col0 + W g of piece 0): add 512 per key row
//    (+1, +8, +16 j for the k-step), 128 per piece.
template <class S>
struct MlaFp8Lane {
  using R = MlaRawTile<S>;
  static constexpr int kPiece = S::kOFrags < 16 ? S::kOFrags : 16;  // W
  int k[4], kpe[2], v;
  __device__ __forceinline__ MlaFp8Lane(int g, int t, int col0) {
    const int xk = R::ckv_swizzle(g);
#pragma unroll
    for (int j = 0; j < 4; ++j) k[j] = g * R::kCkvRowBytes + ((((2 * j) ^ xk) + (t >> 1)) << 4) + 8 * (t & 1);
#pragma unroll
    for (int j = 0; j < 2; ++j)
      kpe[j] = R::kCkvBytes + g * R::kKpeRowBytes + ((((2 * j) ^ R::kpe_swizzle(g)) + (t >> 1)) << 4) + 8 * (t & 1);
    const int byte = col0 + kPiece * g;  // of row 2t, piece 0
    v = 2 * t * R::kCkvRowBytes + (((byte >> 4) ^ R::ckv_swizzle(2 * t)) << 4) + (byte & 15);
  }
  // K's 8 bytes of key fragment f (rows 8 f + g) in 32-dim group grp.
  __device__ __forceinline__ int k_at(int f, int grp) const {
    constexpr int kCkvGroups = S::kDc / 32;
    return grp < kCkvGroups ? k[grp % 4] + 128 * (grp / 4) + f * 8 * R::kCkvRowBytes
                            : kpe[grp - kCkvGroups] + f * 8 * R::kKpeRowBytes;
  }
};

// S = Q K^T of the warp's units over its part of the k-steps from the raw tile, as
// mla_scores does from a 16-bit one (same accumulators, same exchange).
template <class TKV, class S, class Role>
__device__ __forceinline__ void mla_fp8_scores(const Role& role, const MlaFp8Lane<S>& lane_at,
                                               const unsigned char* raw, float (&sacc)[S::kUnitsPerWarp][2][4],
                                               float (&v)[4], float* s_buf, float nope_scale, float pe_scale, int g,
                                               int t) {
  float odd[2][4] = {};
  mla_part_steps<S>(role.kpart, [&](auto step) {
    constexpr int k = decltype(step)::value;
    constexpr int pe = k >= S::kNopeSteps ? 1 : 0;
    std::uint32_t a0[4], a1[4];
    mma::ldmatrix_x4(a0, role.q_lane.at(role.rb * 16, 2 * k));
    mma::ldmatrix_x4(a1, role.q_lane.at(role.rb * 16, 2 * k + 2));
#pragma unroll
    for (int u = 0; u < S::kUnitsPerWarp; ++u) {
      const uint2 w = *reinterpret_cast<const uint2*>(raw + lane_at.k_at(role.frag0 + u, k / 2));
      std::uint32_t b0, b1, b2, b3;
      fp8x4_to_half2x2<TKV>(w.x, b0, b1);
      fp8x4_to_half2x2<TKV>(w.y, b2, b3);
      mma::m16n8k16<__half>(sacc[u][pe], a0, b0, b1);
      mma::m16n8k16<__half>(kMlaOddChain<S> ? odd[pe] : sacc[u][pe], a1, b2, b3);
    }
  });
  mla_store_scores<S>(role, sacc, odd, v, s_buf, nope_scale, pe_scale, g, t);
}

// O += P V of the raw tile over the warp's kCols columns in the permuted order (top of
// the file): per k-step, W-byte pieces of the lane's four key rows, paired by PRMT.
template <class TKV, class S>
__device__ __forceinline__ void mla_fp8_pv(float (&acc)[S::kOFrags][4], const std::uint32_t (&a)[2][4],
                                           const unsigned char* raw, const MlaFp8Lane<S>& lane_at) {
  constexpr int C = S::kOFrags, W = MlaFp8Lane<S>::kPiece, kPieceWords = W / 4;
  constexpr int kRow = MlaRawTile<S>::kCkvRowBytes;
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int piece = 0; piece < C / W; ++piece) {
      std::uint32_t v[4][kPieceWords];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const unsigned char* src = raw + lane_at.v + ((e & 1) + 8 * (e >> 1) + 16 * j) * kRow + 128 * piece;
        if constexpr (kPieceWords == 4) {
          const uint4 x = *reinterpret_cast<const uint4*>(src);
          v[e][0] = x.x, v[e][1] = x.y, v[e][2] = x.z, v[e][3] = x.w;
        } else {
          const uint2 x = *reinterpret_cast<const uint2*>(src);
          v[e][0] = x.x, v[e][1] = x.y;
        }
      }
#pragma unroll
      for (int w = 0; w < kPieceWords; ++w) {
        const std::uint32_t lo01 = __byte_perm(v[0][w], v[1][w], 0x5140),
                            hi01 = __byte_perm(v[0][w], v[1][w], 0x7362);
        const std::uint32_t lo89 = __byte_perm(v[2][w], v[3][w], 0x5140),
                            hi89 = __byte_perm(v[2][w], v[3][w], 0x7362);
        std::uint32_t b[4][2];  // [fragment 4 (piece words + w) + i][b0 / b1]
        fp8x4_to_half2x2<TKV>(lo01, b[0][0], b[1][0]);
        fp8x4_to_half2x2<TKV>(lo89, b[0][1], b[1][1]);
        fp8x4_to_half2x2<TKV>(hi01, b[2][0], b[3][0]);
        fp8x4_to_half2x2<TKV>(hi89, b[2][1], b[3][1]);
#pragma unroll
        for (int i = 0; i < 4; ++i)
          mma::m16n8k16<__half>(acc[4 * (piece * kPieceWords + w) + i], a[j], b[i][0], b[i][1]);
      }
    }
}

}  // namespace kvinfer::cuda
