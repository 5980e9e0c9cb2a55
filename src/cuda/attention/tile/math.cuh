// SPDX-License-Identifier: Apache-2.0
// Arithmetic helpers of the attention kernels: fast base-2 exponent, warp
// reductions, and loading packed KV vectors as float.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/common/nan_max.cuh"

namespace kvinfer::cuda {

inline constexpr float kLog2e = 1.4426950408889634f;

// ex2.approx.ftz.f32: 2^x in a few cycles (relative error ~2^-22); -inf gives 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 8 elements of a KV type held in registers as one load unit (16 bytes for 16-bit
// types, 8 bytes for fp8), converted to float.
template <class T>
struct Vec8;

template <>
struct Vec8<__nv_bfloat16> {
  uint4 raw;
  __device__ __forceinline__ void to_float(float* f) const {
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = __bfloat1622float2(h[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
};

template <>
struct Vec8<__half> {
  uint4 raw;
  __device__ __forceinline__ void to_float(float* f) const {
    const auto* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = __half22float2(h[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
};

template <__nv_fp8_interpretation_t kFormat>
struct Vec8Fp8 {
  uint2 raw;
  __device__ __forceinline__ void to_float(float* f) const {
    const auto* b = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2(b[i], kFormat));
      const float2 x = __half22float2(h);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
};
template <>
struct Vec8<__nv_fp8_e4m3> : Vec8Fp8<__NV_E4M3> {};
template <>
struct Vec8<__nv_fp8_e5m2> : Vec8Fp8<__NV_E5M2> {};

// Loads 8 consecutive elements (read-only, streaming: KV is read once per item).
template <class T>
__device__ __forceinline__ Vec8<T> load_vec8(const T* p) {
  Vec8<T> v;
  if constexpr (sizeof(T) == 2) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.raw.x), "=r"(v.raw.y), "=r"(v.raw.z), "=r"(v.raw.w)
                 : "l"(p));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.raw.x), "=r"(v.raw.y) : "l"(p));
  }
  return v;
}

template <class T>
__device__ __forceinline__ void zero(Vec8<T>& v) {
  v.raw = {};
}

}  // namespace kvinfer::cuda
