// SPDX-License-Identifier: Apache-2.0
#include "kvinfer/core/dtype.hpp"

#include <array>
#include <utility>

namespace kvinfer {

std::optional<DType> parse_dtype(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, DType>, 9> kShort = {{
      {"f32", DType::kF32}, {"f16", DType::kF16}, {"fp16", DType::kF16},
      {"bf16", DType::kBF16}, {"e4m3", DType::kE4M3}, {"fp8", DType::kE4M3},
      {"e5m2", DType::kE5M2}, {"u8", DType::kU8}, {"i32", DType::kI32},
  }};
  for (auto [s, t] : kShort) if (s == name) return t;
  if (name == "i64") return DType::kI64;
  for (int i = 0; i <= int(DType::kBool); ++i) {
    if (dtype_name(DType(i)) == name) return DType(i);
  }
  return std::nullopt;
}

}  // namespace kvinfer
