// SPDX-License-Identifier: Apache-2.0
// Exhaustive and randomised checks of the host float conversions against references
// built independently here: field decoding with std::ldexp and nearest-value search in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kvinfer/core/float_convert.hpp"

namespace kvinfer {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kMaxReported = 8;  // mismatches printed before only counting

struct Format {
  const char* name;
  int total_bits;
  int exp_bits;
  int mant_bits;
  int bias;
  bool ieee_specials;  // all-ones exponent is inf/NaN; otherwise only all-ones is NaN (e4m3)
  bool saturating;     // satfinite: overflow and inf give +-max
  float (*decode)(std::uint32_t);
  std::uint32_t (*encode)(float);

  std::uint32_t sign_bit() const { return 1u << (total_bits - 1); }
  std::uint32_t exp_max() const { return (1u << exp_bits) - 1u; }
  std::uint32_t mant_mask() const { return (1u << mant_bits) - 1u; }
  std::uint32_t num_patterns() const { return 1u << total_bits; }
  // Magnitude bits of the largest finite value.
  std::uint32_t max_finite() const {
    return ieee_specials ? (exp_max() << mant_bits) - 1u : (exp_max() << mant_bits) | (mant_mask() - 1u);
  }
  bool is_nan_pattern(std::uint32_t bits) const {
    const std::uint32_t mag = bits & (sign_bit() - 1u);
    const std::uint32_t exp = mag >> mant_bits;
    const std::uint32_t mant = mag & mant_mask();
    return ieee_specials ? (exp == exp_max() && mant != 0) : mag == ((exp_max() << mant_bits) | mant_mask());
  }
  // What +-inf and finite overflow become (magnitude bits).
  std::uint32_t overflow_result() const { return saturating ? max_finite() : exp_max() << mant_bits; }
};

// Names the parameter in gtest's messages instead of dumping its bytes.
void PrintTo(const Format& f, std::ostream* os) {
  *os << f.name;
}

// The library's conversions of one format on the 32-bit patterns Format holds.
template <class Bits, float (*Decode)(Bits), Bits (*Encode)(float)>
struct Codec {
  static float decode(std::uint32_t b) { return Decode(static_cast<Bits>(b)); }
  static std::uint32_t encode(float x) { return Encode(x); }
};
using F16 = Codec<std::uint16_t, f16_to_f32, f32_to_f16>;
using BF16 = Codec<std::uint16_t, bf16_to_f32, f32_to_bf16>;
using E4M3 = Codec<std::uint8_t, e4m3_to_f32, f32_to_e4m3>;
using E5M2 = Codec<std::uint8_t, e5m2_to_f32, f32_to_e5m2>;

const Format kFormats[] = {
    {"f16", 16, 5, 10, 15, true, false, F16::decode, F16::encode},
    {"bf16", 16, 8, 7, 127, true, false, BF16::decode, BF16::encode},
    {"e4m3", 8, 4, 3, 7, false, true, E4M3::decode, E4M3::encode},
    {"e5m2", 8, 5, 2, 15, true, true, E5M2::decode, E5M2::encode},
};

std::uint32_t bits_of(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

// Value of a pattern from its fields, as the format definitions state it.
double reference_decode(const Format& f, std::uint32_t bits) {
  const bool negative = (bits & f.sign_bit()) != 0;
  const std::uint32_t exp = (bits >> f.mant_bits) & f.exp_max();
  const std::uint32_t mant = bits & f.mant_mask();
  double mag;
  if (f.is_nan_pattern(bits)) {
    mag = std::numeric_limits<double>::quiet_NaN();
  } else if (f.ieee_specials && exp == f.exp_max()) {
    mag = std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<double>(mant), 1 - f.bias - f.mant_bits);
  } else {
    mag = std::ldexp(static_cast<double>(mant + (1u << f.mant_bits)),
                     static_cast<int>(exp) - f.bias - f.mant_bits);
  }
  return std::copysign(mag, negative ? -1.0 : 1.0);
}

// The value the pattern after max_finite would have if the exponent range went on;
// where rounding lands on it the result has overflowed.
double value_beyond_max(const Format& f) {
  const std::uint32_t next = f.max_finite() + 1u;
  return std::ldexp(static_cast<double>((next & f.mant_mask()) + (1u << f.mant_bits)),
                    static_cast<int>(next >> f.mant_bits) - f.bias - f.mant_bits);
}

// Round to nearest even by searching the sorted table of non-negative finite values.
class ReferenceEncoder {
 public:
  explicit ReferenceEncoder(const Format& f) : f_(f) {
    for (std::uint32_t p = 0; p <= f.max_finite(); ++p) values_.push_back(reference_decode(f, p));
    values_.push_back(value_beyond_max(f));
  }

  // Expected pattern for a non-NaN float.
  std::uint32_t encode(float x) const {
    const std::uint32_t sign = std::signbit(x) ? f_.sign_bit() : 0u;
    if (std::isinf(x)) return sign | f_.overflow_result();
    const double a = std::fabs(static_cast<double>(x));
    const auto it = std::upper_bound(values_.begin(), values_.end(), a);
    std::uint32_t lo = static_cast<std::uint32_t>(it - values_.begin()) - 1u;
    std::uint32_t pick = lo;
    if (values_[lo] != a) {
      if (lo + 1u == values_.size()) return sign | f_.overflow_result();  // beyond even the virtual value
      const double mid = (values_[lo] + values_[lo + 1u]) / 2;            // exact in double
      if (a > mid || (a == mid && (lo & 1u))) pick = lo + 1u;
    }
    return sign | (pick > f_.max_finite() ? f_.overflow_result() : pick);
  }

 private:
  const Format& f_;
  std::vector<double> values_;  // values_[p] for p <= max_finite, then value_beyond_max
};

// Checks one conversion result; NaN inputs only need a NaN of the same sign
// (e4m3 has exactly one per sign).
struct EncodeChecker {
  const Format& f;
  const ReferenceEncoder& ref;
  long mismatches = 0;

  void check(float x) {
    const std::uint32_t got = f.encode(x);
    bool ok;
    std::uint32_t want;
    if (std::isnan(x)) {
      want = (std::signbit(x) ? f.sign_bit() : 0u) |
             (f.ieee_specials ? f.exp_max() << f.mant_bits | 1u : f.max_finite() + 1u);
      ok = f.is_nan_pattern(got) && (got & f.sign_bit()) == (want & f.sign_bit()) &&
           (f.ieee_specials || got == want);
    } else {
      want = ref.encode(x);
      ok = got == want;
    }
    if (!ok && ++mismatches <= kMaxReported) {
      ADD_FAILURE() << f.name << ": float bits 0x" << std::hex << bits_of(x) << " (" << std::dec << x
                    << ") encoded 0x" << std::hex << got << ", expected 0x" << want;
    }
  }
};

class FloatConvertFormat : public ::testing::TestWithParam<Format> {};

TEST_P(FloatConvertFormat, DecodeMatchesFieldReferenceForAllPatterns) {
  const Format& f = GetParam();
  long mismatches = 0;
  for (std::uint32_t p = 0; p < f.num_patterns(); ++p) {
    const float got = f.decode(p);
    const double want = reference_decode(f, p);
    const bool ok = std::isnan(want) ? std::isnan(got) && std::signbit(got) == std::signbit(want)
                                     : bits_of(got) == bits_of(static_cast<float>(want)) &&
                                           static_cast<double>(static_cast<float>(want)) == want;
    if (!ok && ++mismatches <= kMaxReported) {
      ADD_FAILURE() << f.name << ": pattern 0x" << std::hex << p << " decoded to " << got << ", expected "
                    << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_P(FloatConvertFormat, EncodeOfDecodeRoundTripsEveryPattern) {
  const Format& f = GetParam();
  long mismatches = 0;
  for (std::uint32_t p = 0; p < f.num_patterns(); ++p) {
    const float x = f.decode(p);
    const std::uint32_t got = f.encode(x);
    const std::uint32_t sign = p & f.sign_bit();
    std::uint32_t want = p;
    bool ok;
    if (f.is_nan_pattern(p)) {
      ok = f.is_nan_pattern(got) && (got & f.sign_bit()) == sign;
    } else {
      // satfinite maps e5m2's infinities to +-max; every other value is representable.
      if (std::isinf(x) && f.saturating) want = sign | f.max_finite();
      ok = got == want;
    }
    if (!ok && ++mismatches <= kMaxReported) {
      ADD_FAILURE() << f.name << ": pattern 0x" << std::hex << p << " -> " << x << " -> 0x" << got
                    << ", expected 0x" << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// Every pair of adjacent finite values (subnormals and zero included): the exact
// midpoint ties to the even mantissa, one float ulp either side picks the nearer.
TEST_P(FloatConvertFormat, MidpointsOfAdjacentValuesRoundToEven) {
  const Format& f = GetParam();
  long mismatches = 0;
  auto expect = [&](float x, std::uint32_t want, const char* what) {
    const std::uint32_t got = f.encode(x);
    if (got != want && ++mismatches <= kMaxReported) {
      ADD_FAILURE() << f.name << " " << what << ": " << x << " (0x" << std::hex << bits_of(x) << ") -> 0x"
                    << got << ", expected 0x" << want;
    }
  };
  for (std::uint32_t lo = 0; lo < f.max_finite(); ++lo) {
    const std::uint32_t hi = lo + 1u;
    const double mid = (reference_decode(f, lo) + reference_decode(f, hi)) / 2;
    const float midf = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(midf), mid) << f.name << ": midpoint not a float";
    const std::uint32_t even = (lo & 1u) == 0 ? lo : hi;
    for (const std::uint32_t sign : {0u, f.sign_bit()}) {
      const float s = sign ? -1.0f : 1.0f;
      expect(s * midf, sign | even, "midpoint");
      expect(s * std::nextafter(midf, kInf), sign | hi, "above midpoint");
      expect(s * std::nextafter(midf, 0.0f), sign | lo, "below midpoint");
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// Past the largest finite value: f16/bf16 overflow to inf from max + half ulp on
// (the tie goes to the even pattern, which is inf); fp8 saturates to max.
TEST_P(FloatConvertFormat, BeyondMaxOverflowsOrSaturates) {
  const Format& f = GetParam();
  const double max = reference_decode(f, f.max_finite());
  const double mid = (max + value_beyond_max(f)) / 2;
  const float midf = static_cast<float>(mid);
  ASSERT_EQ(static_cast<double>(midf), mid);
  const std::uint32_t over = f.overflow_result();
  for (const std::uint32_t sign : {0u, f.sign_bit()}) {
    const float s = sign ? -1.0f : 1.0f;
    SCOPED_TRACE(std::string(f.name) + (sign ? " negative" : " positive"));
    EXPECT_EQ(f.encode(s * static_cast<float>(max)), sign | f.max_finite());
    EXPECT_EQ(f.encode(s * std::nextafter(midf, 0.0f)), sign | f.max_finite());
    // For e4m3 the tie at 464 already goes to 448 (even), for the others to the overflow pattern.
    EXPECT_EQ(f.encode(s * midf), sign | ((f.max_finite() & 1u) == 0 ? f.max_finite() : over));
    EXPECT_EQ(f.encode(s * std::nextafter(midf, kInf)), sign | over);
    EXPECT_EQ(f.encode(s * static_cast<float>(value_beyond_max(f))), sign | over);
    EXPECT_EQ(f.encode(s * static_cast<float>(max * 4)), sign | over);
    EXPECT_EQ(f.encode(s * std::numeric_limits<float>::max()), sign | over);
    EXPECT_EQ(f.encode(s * kInf), sign | over);
  }
}

// Float32 values at or below half the smallest subnormal become zero of the same sign;
// the sweep walks float bit patterns from the smallest denormal up to that half.
TEST_P(FloatConvertFormat, BelowHalfSmallestSubnormalGivesSignedZero) {
  const Format& f = GetParam();
  const float half_min = static_cast<float>(reference_decode(f, 1) / 2);
  ASSERT_GT(half_min, 0.0f);
  const std::uint32_t top = bits_of(half_min);
  const std::uint32_t stride = std::max<std::uint32_t>(1, top / 200000);
  long mismatches = 0;
  auto check = [&](std::uint32_t b) {
    const float x = std::bit_cast<float>(b);
    const std::uint32_t pos = f.encode(x);
    const std::uint32_t neg = f.encode(-x);
    if ((pos != 0 || neg != f.sign_bit()) && ++mismatches <= kMaxReported) {
      ADD_FAILURE() << f.name << ": +-" << x << " -> 0x" << std::hex << pos << " / 0x" << neg;
    }
  };
  for (std::uint32_t b = 1; b < top; b += stride) check(b);
  check(top);
  check(top - 1);
  check(bits_of(std::numeric_limits<float>::min()) <= top ? bits_of(std::numeric_limits<float>::min()) : top);
  EXPECT_EQ(mismatches, 0);
  // Just above the half rounds up to the smallest subnormal.
  EXPECT_EQ(f.encode(std::nextafter(half_min, kInf)), 1u);
  EXPECT_EQ(f.encode(-std::nextafter(half_min, kInf)), f.sign_bit() | 1u);
}

// Random float32 bit patterns (every exponent, NaN, inf, denormals) plus a sample
// concentrated on the format's own exponent range, against the double reference.
TEST_P(FloatConvertFormat, MatchesReferenceEncoderOnRandomFloats) {
  const Format& f = GetParam();
  const ReferenceEncoder ref(f);
  EncodeChecker checker{f, ref};
  std::mt19937 rng(20240611u + f.total_bits * 31u + f.mant_bits);
  for (int i = 0; i < 1'000'000; ++i) checker.check(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  // Exponents from below the subnormal range to above the max.
  const int lo_exp = 127 + 1 - f.bias - f.mant_bits - 3;
  const int hi_exp = 127 + static_cast<int>(f.exp_max()) - f.bias + 2;
  std::uniform_int_distribution<int> exp_dist(std::max(0, lo_exp), std::min(254, hi_exp));
  for (int i = 0; i < 1'000'000; ++i) {
    const std::uint32_t r = static_cast<std::uint32_t>(rng());
    const std::uint32_t b = (r & 0x807FFFFFu) | (static_cast<std::uint32_t>(exp_dist(rng)) << 23);
    checker.check(std::bit_cast<float>(b));
  }
  for (const float x : {0.0f, -0.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()}) {
    checker.check(x);
  }
  EXPECT_EQ(checker.mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, FloatConvertFormat, ::testing::ValuesIn(kFormats),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(info.param.name);
                         });

TEST(FloatConvert, F16MatchesCompilerFloat16OnRandomFloats) {
#if defined(__FLT16_MAX__)
  std::mt19937 rng(7u);
  std::vector<std::uint32_t> inputs = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                       0xFFC00000u, 0x7F800001u, 0x00000001u, 0x807FFFFFu, 0x477FF000u,
                                       0x477FEFFFu, 0x33000000u, 0x33000001u, 0x7F7FFFFFu};
  for (int i = 0; i < 4'000'000; ++i) inputs.push_back(static_cast<std::uint32_t>(rng()));
  long mismatches = 0;
  for (const std::uint32_t b : inputs) {
    const float x = std::bit_cast<float>(b);
    const _Float16 h = static_cast<_Float16>(x);
    std::uint16_t want;
    std::memcpy(&want, &h, sizeof(want));
    const std::uint16_t got = f32_to_f16(x);
    const bool ok =
        std::isnan(x) ? (got & 0x7FFFu) > 0x7C00u && (got & 0x8000u) == (want & 0x8000u) : got == want;
    if (!ok && ++mismatches <= kMaxReported) {
      ADD_FAILURE() << "float bits 0x" << std::hex << b << ": got 0x" << got << ", _Float16 0x" << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
  // And the widening direction, every pattern.
  for (std::uint32_t p = 0; p < 0x10000u; ++p) {
    const std::uint16_t p16 = static_cast<std::uint16_t>(p);
    _Float16 h;
    std::memcpy(&h, &p16, sizeof(h));
    const float want = static_cast<float>(h);
    const float got = f16_to_f32(p16);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got) && std::signbit(got) == std::signbit(want)) << std::hex << p;
    } else {
      EXPECT_EQ(bits_of(got), bits_of(want)) << std::hex << p;
    }
  }
#else
  GTEST_SKIP() << "compiler has no _Float16";
#endif
}

// bf16 against an RNE computed in double from the two bf16 neighbours of x.
TEST(FloatConvert, BF16MatchesDoubleRoundingOnRandomFloats) {
  std::mt19937 rng(11u);
  long mismatches = 0;
  for (int i = 0; i < 4'000'000; ++i) {
    const std::uint32_t b = static_cast<std::uint32_t>(rng());
    const float x = std::bit_cast<float>(b);
    const std::uint16_t got = f32_to_bf16(x);
    std::uint16_t want;
    if (std::isnan(x)) {
      if ((got & 0x7FFFu) > 0x7F80u && (got >> 15) == (b >> 31)) continue;
      want = static_cast<std::uint16_t>((b >> 16) | 0x0040u);
    } else if (std::isinf(x)) {
      want = static_cast<std::uint16_t>(b >> 16);
    } else {
      const std::uint16_t down = static_cast<std::uint16_t>(b >> 16);  // toward zero
      const std::uint16_t up = static_cast<std::uint16_t>(down + 1u);  // away from zero, may be inf
      const double d = std::fabs(static_cast<double>(bf16_to_f32(down)));
      // The value of `up` when it is the inf pattern is 2^128, where rounding would land.
      const double u =
          (up & 0x7FFFu) == 0x7F80u ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(bf16_to_f32(up)));
      const double a = std::fabs(static_cast<double>(x));
      const double to_down = a - d;
      const double to_up = u - a;
      want = to_down < to_up || (to_down == to_up && (down & 1u) == 0) ? down : up;
    }
    if (got != want && ++mismatches <= kMaxReported) {
      ADD_FAILURE() << "float bits 0x" << std::hex << b << ": got 0x" << got << ", expected 0x" << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(FloatConvert, SignedZerosInfinitiesAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // f16 and bf16 alike: signed zeros, infinities, and NaN kept a NaN with its sign.
  for (const auto& [encode, inf] : {std::pair{&F16::encode, 0x7C00u}, std::pair{&BF16::encode, 0x7F80u}}) {
    SCOPED_TRACE(inf == 0x7C00u ? "f16" : "bf16");
    EXPECT_EQ(encode(0.0f), 0x0000u);
    EXPECT_EQ(encode(-0.0f), 0x8000u);
    EXPECT_EQ(encode(kInf), inf);
    EXPECT_EQ(encode(-kInf), 0x8000u | inf);
    EXPECT_GT(encode(nan) & 0x7FFFu, inf);
    EXPECT_EQ(encode(-nan) & 0x8000u, 0x8000u);
  }
  EXPECT_EQ(bits_of(f16_to_f32(0x8000)), 0x80000000u);
  EXPECT_EQ(f16_to_f32(0x7C00), kInf);
  EXPECT_EQ(f16_to_f32(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0xFE00)));
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));

  // A NaN whose payload sits only in the low 16 bits must not truncate to inf.
  EXPECT_GT(f32_to_bf16(std::bit_cast<float>(0x7F800001u)) & 0x7FFF, 0x7F80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up past max
  EXPECT_EQ(bits_of(bf16_to_f32(0x8000)), 0x80000000u);
  EXPECT_EQ(bf16_to_f32(0x7F80), kInf);

  EXPECT_EQ(f32_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e4m3(nan), 0x7F);
  EXPECT_EQ(f32_to_e4m3(-nan), 0xFF);
  EXPECT_EQ(bits_of(e4m3_to_f32(0x80)), 0x80000000u);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)) && std::signbit(e4m3_to_f32(0xFF)));
  EXPECT_EQ(e4m3_to_f32(0x7E), kE4M3Max);
  EXPECT_EQ(e4m3_to_f32(0x78), 256.0f);  // exponent 15 is a normal binade in e4m3
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));

  EXPECT_EQ(f32_to_e5m2(0.0f), 0x00);
  EXPECT_EQ(f32_to_e5m2(-0.0f), 0x80);
  EXPECT_TRUE((f32_to_e5m2(nan) & 0x7F) > 0x7C);
  EXPECT_EQ(f32_to_e5m2(-nan) & 0x80, 0x80);
  EXPECT_EQ(bits_of(e5m2_to_f32(0x80)), 0x80000000u);
  EXPECT_EQ(e5m2_to_f32(0x7C), kInf);
  EXPECT_EQ(e5m2_to_f32(0xFC), -kInf);
  EXPECT_TRUE(std::isnan(e5m2_to_f32(0x7D)));
  EXPECT_EQ(e5m2_to_f32(0x7B), kE5M2Max);
  EXPECT_EQ(e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
}

TEST(FloatConvert, E4M3SaturatesFiniteOverflowAndInfinity) {
  for (const float s : {1.0f, -1.0f}) {
    const std::uint8_t max = s > 0 ? 0x7E : 0xFE;
    EXPECT_EQ(f32_to_e4m3(s * 448.0f), max);
    EXPECT_EQ(f32_to_e4m3(s * 449.0f), max);
    EXPECT_EQ(f32_to_e4m3(s * 464.0f), max);  // midpoint to 480 (beyond max): ties to even 448
    EXPECT_EQ(f32_to_e4m3(s * 465.0f), max);  // would round to 480
    EXPECT_EQ(f32_to_e4m3(s * 480.0f), max);  // would be pattern 0x7F, which is NaN
    EXPECT_EQ(f32_to_e4m3(s * 1e9f), max);
    EXPECT_EQ(f32_to_e4m3(s * kInf), max);
  }
  EXPECT_EQ(f32_to_e4m3(431.0f), 0x7D);  // below the 416/448 midpoint
  EXPECT_EQ(f32_to_e4m3(432.0f), 0x7E);  // tie to even 448
}

TEST(FloatConvert, E5M2SaturatesFiniteOverflowAndInfinity) {
  for (const float s : {1.0f, -1.0f}) {
    const std::uint8_t max = s > 0 ? 0x7B : 0xFB;
    EXPECT_EQ(f32_to_e5m2(s * kE5M2Max), max);
    EXPECT_EQ(f32_to_e5m2(s * 61439.0f), max);
    EXPECT_EQ(f32_to_e5m2(s * 61440.0f), max);  // tie would go to even 65536: saturates
    EXPECT_EQ(f32_to_e5m2(s * kE5M2Max * 1.5f), max);
    EXPECT_EQ(f32_to_e5m2(s * 1e9f), max);
    EXPECT_EQ(f32_to_e5m2(s * kInf), max);
  }
}

TEST(FloatConvert, F16OverflowsToInfinityFromHalfUlpAboveMax) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-65520.0f), 0xFC00);
  EXPECT_EQ(f32_to_f16(1e9f), 0x7C00);
}

}  // namespace
}  // namespace kvinfer
