// SPDX-License-Identifier: Apache-2.0
// Element types of the CUDA backend and their conversions to and from float, the
// accumulation type of every kernel; plus dispatch from a runtime DType.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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
