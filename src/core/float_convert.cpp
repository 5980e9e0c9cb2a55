// SPDX-License-Identifier: Apache-2.0
// Portable host conversions between float32 and fp16 / bf16 / fp8 (e4m3, e5m2),
// done on bit patterns so that no F16C, AVX512-BF16 or _Float16 support is needed.
#include "kvinfer/core/float_convert.hpp"

#include <bit>
#include <cstdint>

namespace kvinfer {
namespace {

constexpr std::uint32_t kF32SignBit = 0x80000000u;
constexpr std::uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr std::uint32_t kF32InfBits = 0x7F800000u;
constexpr std::uint32_t kF32QuietBit = 0x00400000u;
constexpr int kF32MantBits = 23;
constexpr int kF32Bias = 127;

// A narrow binary format, described by its magnitude bit patterns (sign excluded).
struct NarrowFormat {
  int mant_bits;
  int bias;
  std::uint32_t max_finite;   // magnitude bits of the largest finite value
  std::uint32_t on_overflow;  // magnitude bits for finite overflow and for infinity
  std::uint32_t nan;          // magnitude bits of the NaN produced from a float NaN
  int sign_shift;             // position of the sign bit
};

// f16/bf16 NaN keeps the top of the float payload and is made quiet, as x86 F16C
// (vcvtps2ph) does; fp8 has no room for payloads, so it gets the canonical
// all-ones NaN (what PTX cvt produces).
constexpr NarrowFormat kF16{10, 15, 0x7BFFu, 0x7C00u, 0x7E00u, 15};
constexpr NarrowFormat kBF16{7, 127, 0x7F7Fu, 0x7F80u, 0x7FC0u, 15};
// satfinite: both overflow and infinity saturate to the largest finite value.
constexpr NarrowFormat kE4M3{3, 7, 0x7Eu, 0x7Eu, 0x7Fu, 7};
constexpr NarrowFormat kE5M2{2, 15, 0x7Bu, 0x7Bu, 0x7Fu, 7};

// v / 2^shift rounded to nearest, ties to even; 1 <= shift <= 31.
constexpr std::uint32_t shift_right_rne(std::uint32_t v, int shift) {
  const std::uint32_t q = v >> shift;
  const std::uint32_t rem = v & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

std::uint32_t encode(const NarrowFormat& f, float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (bits & kF32SignBit) >> (31 - f.sign_shift);
  const std::uint32_t abs = bits & kF32AbsMask;
  if (abs > kF32InfBits) {
    std::uint32_t nan = f.nan;
    if (f.mant_bits >= 7) nan |= (abs & ((1u << kF32MantBits) - 1u)) >> (kF32MantBits - f.mant_bits);
    return sign | nan;
  }
  // Infinities need no case of their own: exponent 255 overflows every format below.

  // Float subnormals share the exponent of the smallest normal, without the
  // implicit bit; that lets one formula cover both (bf16 keeps them subnormal).
  const int float_exp = static_cast<int>(abs >> kF32MantBits);
  const std::uint32_t mant = abs & ((1u << kF32MantBits) - 1u);
  const std::uint32_t sig = float_exp == 0 ? mant : (mant | (1u << kF32MantBits));
  const int target_exp =
      (float_exp == 0 ? 1 : float_exp) - kF32Bias + f.bias;  // biased, in the narrow format

  int shift = kF32MantBits - f.mant_bits;
  std::uint32_t v;
  if (target_exp >= 1) {
    // Exponent and mantissa side by side: a rounding carry out of the mantissa
    // bumps the exponent, which is exactly the right result (also into overflow).
    v = (static_cast<std::uint32_t>(target_exp - 1) << kF32MantBits) + sig;
  } else {
    // Subnormal in the narrow format: the significand loses 1 - target_exp more bits;
    // a carry into the exponent field gives the smallest normal, again correct.
    v = sig;
    shift += 1 - target_exp;
  }
  // sig < 2^24, so beyond 25 bits of shift the value is below a quarter unit: zero.
  const std::uint32_t mag = shift > 25 ? 0u : shift_right_rne(v, shift);
  return sign | (mag > f.max_finite ? f.on_overflow : mag);
}

// Decoder for formats whose exponent field is below float's: normals rebias,
// subnormals are an integer times a power of two (one exact float multiply).
template <int kExpBits, int kMantBits, int kBias>
float decode_narrow(std::uint32_t bits, bool ieee_specials) {
  constexpr int kTotal = 1 + kExpBits + kMantBits;
  constexpr std::uint32_t kMantMask = (1u << kMantBits) - 1u;
  constexpr std::uint32_t kExpMax = (1u << kExpBits) - 1u;
  // 2^(1 - bias - mant_bits), the subnormal unit, built from its bits.
  const float subnormal_unit =
      std::bit_cast<float>(static_cast<std::uint32_t>(1 - kBias - kMantBits + kF32Bias) << kF32MantBits);

  const std::uint32_t sign = (bits >> (kTotal - 1)) << 31;
  const std::uint32_t exp = (bits >> kMantBits) & kExpMax;
  const std::uint32_t mant = bits & kMantMask;
  std::uint32_t out;
  if (exp == 0) {
    out = std::bit_cast<std::uint32_t>(static_cast<float>(mant) * subnormal_unit);
  } else if (ieee_specials && exp == kExpMax) {
    out = kF32InfBits | (mant << (kF32MantBits - kMantBits)) | (mant != 0 ? kF32QuietBit : 0u);
  } else if (!ieee_specials && exp == kExpMax && mant == kMantMask) {
    out = kF32InfBits | kF32QuietBit;  // e4m3's only NaN
  } else {
    out = (static_cast<std::uint32_t>(static_cast<int>(exp) - kBias + kF32Bias) << kF32MantBits) |
          (mant << (kF32MantBits - kMantBits));
  }
  return std::bit_cast<float>(sign | out);
}

}  // namespace

float f16_to_f32(std::uint16_t bits) {
  return decode_narrow<5, 10, 15>(bits, true);
}

std::uint16_t f32_to_f16(float x) {
  return static_cast<std::uint16_t>(encode(kF16, x));
}

// bf16 is the top half of a float32, so widening is a shift (NaN payloads included).
float bf16_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t f32_to_bf16(float x) {
  return static_cast<std::uint16_t>(encode(kBF16, x));
}

float e4m3_to_f32(std::uint8_t bits) {
  return decode_narrow<4, 3, 7>(bits, false);
}

std::uint8_t f32_to_e4m3(float x) {
  return static_cast<std::uint8_t>(encode(kE4M3, x));
}

float e5m2_to_f32(std::uint8_t bits) {
  return decode_narrow<5, 2, 15>(bits, true);
}

std::uint8_t f32_to_e5m2(float x) {
  return static_cast<std::uint8_t>(encode(kE5M2, x));
}

}  // namespace kvinfer
