// SPDX-License-Identifier: Apache-2.0
// The swizzled shared-memory layouts of 16-bit tiles that every tensor-core family
// reads with ldmatrix (rows) or wgmma (128-byte panels), and a lane's ldmatrix addresses.
#pragma once

#include <cuda_runtime.h>

namespace kvinfer::cuda {

// The 16-byte chunk `chunk` of row `row` of a tile with D 16-bit elements per row:
// chunks are XOR-swizzled within groups of 8 so that the 8 rows an ldmatrix phase
// reads at one logical chunk fall in 8 distinct bank groups.
template <int D>
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) {
  return row * (D / 8) + (chunk ^ (row & 7));
}

// Tile layouts: the byte offset of 16-byte chunk c of row `row` in a tile of kRows
// rows of D 16-bit elements, and kRowBytes, the offset of row + 8 from row (the
// swizzle repeats every 8 rows). SwizzledRows keeps rows whole (ldmatrix operands);
// SwizzledPanels splits them into 64-element panels of 128-byte rows in the 128-byte
// swizzle that wgmma's shared operands take (common/wgmma.cuh).
template <int D, int kRows>
struct SwizzledRows {
  static constexpr int kRowBytes = D * 2;
  __device__ __forceinline__ static int offset(int row, int c) { return swizzled_chunk<D>(row, c) * 16; }
};
template <int D, int kRows>
struct SwizzledPanels {
  static constexpr int kRowBytes = 128;
  static constexpr int kPanelBytes = kRows * 128;
  __device__ __forceinline__ static int offset(int row, int c) {
    return (c / 8) * kPanelBytes + row * 128 + ((c & 7) ^ (row & 7)) * 16;
  }
};

// A lane's ldmatrix addresses in a swizzled tile of D 16-bit elements per row. The
// lane reads rows lane_row + R (R a multiple of 8, so row & 7 is the lane's) at
// chunks c + b (c even, b the lane's 0/1). With the tile 128-byte aligned and rows
// a multiple of 128 bytes, bits 4-6 of the lane's address hold its swizzle
// (row & 7) ^ b, so chunk c + b sits at (base ^ 16 (c & 7)) + 16 (c & ~7) + R row
// bytes: one XOR per distinct c & 7, and the rest folds into ldmatrix's immediate.
// chunk0, a multiple of 8, is the first chunk the lane addresses (a column slice's).
template <int D>
struct SwizzledLane {
  unsigned base;  // shared address of the lane's row, bits 4-6 = its swizzle
  __device__ __forceinline__ SwizzledLane(const unsigned char* tile, int lane_row, int b, int chunk0 = 0)
      : base(static_cast<unsigned>(__cvta_generic_to_shared(tile)) + unsigned(lane_row * D * 2) +
             unsigned(16 * chunk0) + unsigned(16 * ((lane_row & 7) ^ b))) {}
  __device__ __forceinline__ unsigned at(int rows, int c, unsigned offset = 0) const {
    return ((base + offset) ^ unsigned(16 * (c & 7))) + unsigned(16 * (c & ~7) + rows * D * 2);
  }
};

}  // namespace kvinfer::cuda
