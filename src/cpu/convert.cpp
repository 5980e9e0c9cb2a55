// SPDX-License-Identifier: Apache-2.0
// The dispatching row conversions, and their portable implementation: the
// bit-exact scalar conversions of kvinfer/core/float_convert.hpp.
#include "cpu/convert.hpp"

#include <array>
#include <bit>

#include "cpu/kernels.hpp"
#include "kvinfer/core/float_convert.hpp"

namespace kvinfer::cpu {
namespace {

// fp8 has 256 values: a table lookup beats decoding each one.
using Fp8Table = std::array<float, 256>;
template <float (*Decode)(std::uint8_t)>
const Fp8Table& fp8_table() {
  static const Fp8Table table = [] {
    Fp8Table t{};
    for (int b = 0; b < 256; ++b) t[std::size_t(b)] = Decode(std::uint8_t(b));
    return t;
  }();
  return table;
}

// f32_to_bf16 inlined: round to nearest even on the bits; a NaN keeps its sign and
// the top of its payload and is made quiet (identical to kvinfer::f32_to_bf16).
inline std::uint16_t bf16_rne(float x) {
  const auto b = std::bit_cast<std::uint32_t>(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return std::uint16_t((b >> 16) | 0x0040u);
  return std::uint16_t((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

}  // namespace

void load_row(const void* src, DType dtype, float* out, std::int64_t n) {
  kernels().load_row(src, dtype, out, n);
}

void store_row(const float* in, DType dtype, void* dst, std::int64_t n) {
  kernels().store_row(in, dtype, dst, n);
}

namespace portable {

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
      // bf16 is the top half of a float32: a shift the compiler vectorises.
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(std::uint32_t(s[i]) << 16);
      return;
    }
    case DType::kE4M3: {
      const auto* s = static_cast<const std::uint8_t*>(src);
      const Fp8Table& t = fp8_table<e4m3_to_f32>();
      for (std::int64_t i = 0; i < n; ++i) out[i] = t[s[i]];
      return;
    }
    case DType::kE5M2: {
      const auto* s = static_cast<const std::uint8_t*>(src);
      const Fp8Table& t = fp8_table<e5m2_to_f32>();
      for (std::int64_t i = 0; i < n; ++i) out[i] = t[s[i]];
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
      for (std::int64_t i = 0; i < n; ++i) d[i] = bf16_rne(in[i]);
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

}  // namespace portable
}  // namespace kvinfer::cpu
