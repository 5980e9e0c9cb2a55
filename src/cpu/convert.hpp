// SPDX-License-Identifier: Apache-2.0
// Row conversions between storage dtypes and float32 for the CPU backend, through
// the vectorised loops of the processor (cpu/kernels.hpp).
#pragma once

#include <cstdint>

#include "kvinfer/core/dtype.hpp"

namespace kvinfer::cpu {

// out[i] = float(src[i]) for i < n; src has dtype `dtype` (f32, f16, bf16, e4m3, e5m2).
void load_row(const void* src, DType dtype, float* out, std::int64_t n);
// dst[i] = dtype(in[i]) rounded to nearest even.
void store_row(const float* in, DType dtype, void* dst, std::int64_t n);

}  // namespace kvinfer::cpu
