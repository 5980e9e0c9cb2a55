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
namespace {

// A row's elements one by one: each of the loops below is a plain loop over one
// storage type that the compiler vectorises.
template <class Storage, class Widen>
void load_each(const void* src, float* out, std::int64_t n, Widen widen) {
  const auto* s = static_cast<const Storage*>(src);
  for (std::int64_t i = 0; i < n; ++i) out[i] = widen(s[i]);
}

template <class Storage, class Narrow>
void store_each(const float* in, void* dst, std::int64_t n, Narrow narrow) {
  auto* d = static_cast<Storage*>(dst);
  for (std::int64_t i = 0; i < n; ++i) d[i] = narrow(in[i]);
}

template <float (*Decode)(std::uint8_t)>
void load_fp8(const void* src, float* out, std::int64_t n) {
  const Fp8Table& t = fp8_table<Decode>();
  load_each<std::uint8_t>(src, out, n, [&t](std::uint8_t b) { return t[b]; });
}

}  // namespace

void load_row(const void* src, DType dtype, float* out, std::int64_t n) {
  switch (dtype) {
    case DType::kF32:
      return load_each<float>(src, out, n, [](float x) { return x; });
    case DType::kF16:
      return load_each<std::uint16_t>(src, out, n, [](std::uint16_t h) { return f16_to_f32(h); });
    case DType::kBF16:
      // bf16 is the top half of a float32: a shift the compiler vectorises.
      return load_each<std::uint16_t>(src, out, n,
                                      [](std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); });
    case DType::kE4M3:
      return load_fp8<e4m3_to_f32>(src, out, n);
    case DType::kE5M2:
      return load_fp8<e5m2_to_f32>(src, out, n);
    default:
      return;
  }
}

void store_row(const float* in, DType dtype, void* dst, std::int64_t n) {
  switch (dtype) {
    case DType::kF32:
      return store_each<float>(in, dst, n, [](float x) { return x; });
    case DType::kF16:
      return store_each<std::uint16_t>(in, dst, n, [](float x) { return f32_to_f16(x); });
    case DType::kBF16:
      return store_each<std::uint16_t>(in, dst, n, [](float x) { return bf16_rne(x); });
    case DType::kE4M3:
      return store_each<std::uint8_t>(in, dst, n, [](float x) { return f32_to_e4m3(x); });
    case DType::kE5M2:
      return store_each<std::uint8_t>(in, dst, n, [](float x) { return f32_to_e5m2(x); });
    default:
      return;
  }
}

}  // namespace portable
}  // namespace kvinfer::cpu
