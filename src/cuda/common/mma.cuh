// SPDX-License-Identifier: Apache-2.0
// Warp-level tensor-core primitives of sm_80 and later: ldmatrix (shared memory ->
// mma fragments) and mma.sync m16n8k16 with fp32 accumulators, for fp16 and bf16.
// Fragment layouts follow the PTX ISA ("Matrix Fragments for mma.m16n8k16"): with
// g = lane / 4 and t = lane % 4, a thread holds rows g and g + 8 and the column
// pairs 2t, 2t + 1 (and 2t + 8, 2t + 9 for the A operand's k).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace kvinfer::cuda::mma {

// ldmatrix.sync.aligned.m8n8.x4.shared.b16: four 8x8 matrices of 16-bit elements;
// lanes 8i..8i+7 give the row addresses of matrix i, r[i] receives its fragment.
// `s` is a shared-state-space address.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], unsigned s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// The transposing variant: a row-major [k][n] tile read as the column-major B operand.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], unsigned s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// ldmatrix.sync.aligned.m8n8.x2.shared.b16: two 8x8 matrices; lanes 0..15 give the
// row addresses (matrix i: lanes 8i..8i+7), the other lanes' are not used.
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&r)[2], unsigned s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}

// movmatrix.sync.aligned.m8n8.trans.b16: the transpose of an 8x8 matrix of 16-bit
// elements held in fragment layout (lane: row lane / 4, columns 2 (lane % 4) + {0, 1}),
// returned in the same layout.
__device__ __forceinline__ std::uint32_t movmatrix_trans(std::uint32_t x) {
  std::uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: c += a * b.
template <class T>
__device__ __forceinline__ void m16n8k16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  if constexpr (sizeof(T) == 2 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __half>, "mma operands are fp16 or bf16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats rounded to T and packed into one 32-bit register (lo in the low half),
// the layout of an A-operand register.
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
}

}  // namespace kvinfer::cuda::mma
