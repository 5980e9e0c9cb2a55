// SPDX-License-Identifier: Apache-2.0
// Preparing a 16-bit compute tile in shared memory: fp8 staging converted exactly to
// the mma's type, a tile of the other 16-bit type converted to it, RoPE rotation of Q
// or K in place.
#pragma once

#include <cuda_runtime.h>
#include "cuda/attention/tile/math.cuh"
#include "cuda/attention/tile/swizzle.cuh"
#include "cuda/attention/tile/tile_threads.cuh"
#include "cuda/common/convert.cuh"
#include "cuda/common/mma.cuh"

namespace kvinfer::cuda {

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

// Chunk pair (c, c + half) of tile row `row` (16-bit rows of D elements, swizzled)
// made ready in place: read from the fp8 staging row (TIn fp8, raw) or the tile (TIn),
// rotated by RoPE at position pos(row) where freq != null, written back as T.
template <class T, class TIn, int D, class Pos>
__device__ __forceinline__ void prepare_chunk_pair(unsigned char* tile, const unsigned char* raw, const float* freq,
                                                   const Pos& pos, int row, int c, int half) {
  float x[8], y[8];
  uint4* px = reinterpret_cast<uint4*>(tile) + swizzled_chunk<D>(row, c);
  uint4* py = reinterpret_cast<uint4*>(tile) + swizzled_chunk<D>(row, c + half);
  if constexpr (sizeof(TIn) == 1) {
    const auto* r = reinterpret_cast<const uint2*>(raw + row * D);
    fp8_to_float<TIn>(r[c], x);
    fp8_to_float<TIn>(r[c + half], y);
  } else {
    chunk_to_float<TIn>(*px, x);
    chunk_to_float<TIn>(*py, y);
  }
  if (freq != nullptr) rope_pair(x, y, freq, c, pos(row));
  *px = float_to_chunk<T>(x);
  *py = float_to_chunk<T>(y);
}

// Makes a 16-bit compute tile of kRows rows of T ready in place: converts it from the
// fp8 staging tile (TIn fp8, raw != null) or from the other 16-bit type it holds (TIn),
// and/or rotates it by RoPE (freq != null) at position pos(row). Each thread owns
// whole chunk pairs, so no barrier is needed inside.
template <class T, class TIn, int kThreads, int kRows, int D, bool kItemWarps = false, class Pos>
__device__ __forceinline__ void prepare_tile(unsigned char* tile, const unsigned char* raw, const float* freq, const Pos& pos) {
  constexpr int kHalf = D / 16;  // chunk pairs per row
  for (int idx = tile_thread<kItemWarps>(); idx < kRows * kHalf; idx += kThreads) {
    prepare_chunk_pair<T, TIn, D>(tile, raw, freq, pos, idx / kHalf, idx % kHalf, kHalf);
  }
}

// prepare_tile for rows of `dims` elements zero-padded to D (the padded tile): RoPE
// pairs dim d with d + dims / 2, so the chunk pairs are (c, c + dims / 16); the
// padding's chunks of a staged (fp8) tile are written as zeros, those of a 16-bit tile
// are zeros already (the copies fill them). Each thread owns whole chunks.
template <class T, class TIn, int kThreads, int kRows, int D, class Pos>
__device__ __forceinline__ void prepare_padded_tile(unsigned char* tile, const unsigned char* raw, const float* freq,
                                                    const Pos& pos, int dims) {
  const int half = dims / 16;
  for (int idx = int(threadIdx.x); idx < kRows * half; idx += kThreads) {
    prepare_chunk_pair<T, TIn, D>(tile, raw, freq, pos, idx / half, idx % half, half);
  }
  if constexpr (sizeof(TIn) == 1) {
    const int pad = D / 8 - 2 * half;
    for (int idx = int(threadIdx.x); idx < kRows * pad; idx += kThreads) {
      const int row = idx / pad, c = 2 * half + idx % pad;
      reinterpret_cast<uint4*>(tile)[swizzled_chunk<D>(row, c)] = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

}  // namespace kvinfer::cuda
