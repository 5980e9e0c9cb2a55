// SPDX-License-Identifier: Apache-2.0
// Host conversions between float32 and the storage formats fp16, bf16, fp8 e4m3
// and fp8 e5m2 (bit patterns in unsigned integers).
//
// To float32: exact (every value of the narrow formats is a float32).
// From float32: round to nearest, ties to even. NaN stays NaN (sign kept).
//   f16/bf16: overflow gives +-inf.
//   fp8 (OCP FP8, "satfinite" as in PTX cvt.rn.satfinite): a finite value beyond
//   the largest finite one, and an infinity, become +-max (448 for e4m3, 57344 for
//   e5m2); e4m3 has no infinities and one NaN pattern per sign (0x7F / 0xFF).
#pragma once

#include <cstdint>

namespace kvinfer {

float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_f16(float x);
float bf16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_bf16(float x);
float e4m3_to_f32(std::uint8_t bits);
std::uint8_t f32_to_e4m3(float x);
float e5m2_to_f32(std::uint8_t bits);
std::uint8_t f32_to_e5m2(float x);

inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;

}  // namespace kvinfer
