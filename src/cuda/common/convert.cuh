// SPDX-License-Identifier: Apache-2.0
// Element types of the CUDA backend and their conversions to and from float, the
// accumulation type of every kernel; plus dispatch from a runtime DType.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kvinfer/core/dtype.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda {

__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

// Round to nearest even, as the CPU backend's f32_to_f16 / f32_to_bf16.
template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Four fp8 elements (x, first in the low byte) as two registers of two fp16 (lo:
// elements 0, 1; hi: 2, 3; first in the low half): one cvt per pair, each reading
// its half of x in place. Exact: every fp8 value, NaN and infinity included, is an
// fp16 value.
template <class TKV>
__device__ __forceinline__ void fp8x4_to_half2x2(std::uint32_t x, std::uint32_t& lo, std::uint32_t& hi) {
  if constexpr (std::is_same_v<TKV, __nv_fp8_e4m3>) {
    asm("{.reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
  } else {
    static_assert(std::is_same_v<TKV, __nv_fp8_e5m2>);
    asm("{.reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e5m2x2 %0, l;\n cvt.rn.f16x2.e5m2x2 %1, h;\n}"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
  }
}

// Calls f(T{}) with T the CUDA type of a floating dtype among f32, f16, bf16.
template <class F>
decltype(auto) dispatch_float_dtype(DType dtype, std::string_view op, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f(float{});
    case DType::kF16:
      return f(__half{});
    case DType::kBF16:
      return f(__nv_bfloat16{});
    default:
      break;
  }
  throw Error(op, "dtype", dtype_name(dtype), "the CUDA backend supports float32, float16 and bfloat16 here");
}

}  // namespace kvinfer::cuda
