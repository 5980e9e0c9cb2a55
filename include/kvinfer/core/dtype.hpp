// SPDX-License-Identifier: Apache-2.0
// Element types of tensors and their properties.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvinfer {

enum class DType : std::uint8_t {
  kF32,
  kF16,
  kBF16,
  kE4M3,  // OCP FP8 E4M3 (no infinities, max 448)
  kE5M2,  // OCP FP8 E5M2 (IEEE-like, max 57344)
  kU8,
  kI32,
  kI64,
  kBool,  // one byte per element, 0 or 1
};

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kE4M3: return 1;
    case DType::kE5M2: return 1;
    case DType::kU8: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kBool: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kE4M3: return "float8_e4m3";
    case DType::kE5M2: return "float8_e5m2";
    case DType::kU8: return "uint8";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kBool: return "bool";
  }
  return "?";
}

// Parses the names printed by dtype_name plus the short forms f32, f16, bf16,
// e4m3, e5m2, fp8 (= e4m3), u8, i32, i64.
std::optional<DType> parse_dtype(std::string_view name);

constexpr bool is_fp8(DType t) { return t == DType::kE4M3 || t == DType::kE5M2; }
constexpr bool is_half(DType t) { return t == DType::kF16 || t == DType::kBF16; }
constexpr bool is_float(DType t) { return t == DType::kF32 || is_half(t) || is_fp8(t); }

}  // namespace kvinfer
