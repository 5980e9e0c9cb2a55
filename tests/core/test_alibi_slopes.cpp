// SPDX-License-Identifier: Apache-2.0
// The standard ALiBi slopes against hand values, and the positional-encoding names.
#include <gtest/gtest.h>

#include <cmath>

#include "kvinfer/attention/options.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer {
namespace {

TEST(AlibiSlopes, PowerOfTwoHeads) {
  const std::vector<float> s = alibi_slopes(8);
  const std::vector<float> want = {1.0f / 2,  1.0f / 4,  1.0f / 8,   1.0f / 16,
                                   1.0f / 32, 1.0f / 64, 1.0f / 128, 1.0f / 256};
  EXPECT_EQ(s, want);  // powers of two are exact
  EXPECT_EQ(alibi_slopes(1), std::vector<float>{1.0f / 256});
  EXPECT_EQ(alibi_slopes(2), (std::vector<float>{1.0f / 16, 1.0f / 256}));
  // 4 heads: 2^-2, 2^-4, 2^-6, 2^-8.
  EXPECT_EQ(alibi_slopes(4), (std::vector<float>{0.25f, 1.0f / 16, 1.0f / 64, 1.0f / 256}));
}

TEST(AlibiSlopes, TwelveHeadsInterleaveTheSeriesOfSixteen) {
  const std::vector<float> s = alibi_slopes(12);
  ASSERT_EQ(s.size(), 12u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(s[i], 1.0f / float(2 << i)) << i;
  // The 16-head series is 2^-0.5, 2^-1, 2^-1.5, ...; its odd terms come next.
  const double sqrt_half = 0.70710678118654752440;
  const double want[] = {sqrt_half, sqrt_half / 2, sqrt_half / 4, sqrt_half / 8};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s[8 + i], float(want[i])) << i;
}

TEST(AlibiSlopes, OddCountMatchesTheFormula) {
  // 6 heads: n' = 4, then 2^-1, 2^-3 (odd terms of the 8-head series).
  EXPECT_EQ(alibi_slopes(6),
            (std::vector<float>{0.25f, 1.0f / 16, 1.0f / 64, 1.0f / 256, 0.5f, 0.125f}));
  const std::vector<float> s40 = alibi_slopes(40);
  ASSERT_EQ(s40.size(), 40u);
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(s40[i], std::exp2(-8.0 * (i + 1) / 32)) << i;
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(s40[32 + i], std::exp2(-4.0 * (2 * i + 1) / 32)) << i;
}

TEST(AlibiSlopes, RejectsNonPositiveHeads) {
  try {
    alibi_slopes(0);
    FAIL() << "expected kvinfer::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "num_heads");
  }
  EXPECT_THROW(alibi_slopes(-3), Error);
}

TEST(PosEncoding, Names) {
  EXPECT_EQ(pos_encoding_name(PosEncoding::kNone), "NONE");
  EXPECT_EQ(pos_encoding_name(PosEncoding::kRopeLlama), "ROPE_LLAMA");
  EXPECT_EQ(pos_encoding_name(PosEncoding::kAlibi), "ALIBI");
}

}  // namespace
}  // namespace kvinfer
