// SPDX-License-Identifier: Apache-2.0
#include "cpu/convert.hpp"

#include "kvinfer/core/float_convert.hpp"

namespace kvinfer::cpu {

void load_row(const void* src, DType dtype, float* out, std::int64_t n) {
  switch (dtype) {
    case DType::kF32: {
      const auto* s = static_cast<const float*>(src);
      for (std::int64_t i = 0; i < n; ++i) out[i] = s[i];
      return;
    }
    case DType::kF16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::kBF16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::kE4M3: {
      const auto* s = static_cast<const std::uint8_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(s[i]);
      return;
    }
    case DType::kE5M2: {
      const auto* s = static_cast<const std::uint8_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) out[i] = e5m2_to_f32(s[i]);
      return;
    }
    default:
      break;
  }
}

void store_row(const float* in, DType dtype, void* dst, std::int64_t n) {
  switch (dtype) {
    case DType::kF32: {
      auto* d = static_cast<float*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = in[i];
      return;
    }
    case DType::kF16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(in[i]);
      return;
    }
    case DType::kBF16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(in[i]);
      return;
    }
    case DType::kE4M3: {
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = f32_to_e4m3(in[i]);
      return;
    }
    case DType::kE5M2: {
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = f32_to_e5m2(in[i]);
      return;
    }
    default:
      break;
  }
}

}  // namespace kvinfer::cpu
