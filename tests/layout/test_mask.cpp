// SPDX-License-Identifier: Apache-2.0
// mask_indptr: element offsets of a ragged custom mask, or byte offsets of its
// per-request packed form.
#include <gtest/gtest.h>

#include <random>

#include "kvinfer/core/error.hpp"
#include "kvinfer/layout/mask.hpp"
#include "testing/expect_error.hpp"

namespace kvinfer {
namespace {

using testing::expect_error;
using V32 = std::vector<std::int32_t>;
using V64 = std::vector<std::int64_t>;

TEST(MaskIndptr, Examples) {
  const V32 qo{3, 1, 0, 5, 2}, kv{5, 7, 4, 0, 9};
  // Blocks of 15, 7, 0, 0 and 18 elements; packed 2, 1, 0, 0 and 3 bytes.
  EXPECT_EQ(mask_indptr(qo, kv, false), (V64{0, 15, 22, 22, 22, 40}));
  EXPECT_EQ(mask_indptr(qo, kv, true), (V64{0, 2, 3, 3, 3, 6}));
  EXPECT_EQ(mask_indptr(V32{8}, V32{8}, true), (V64{0, 8}));
  EXPECT_EQ(mask_indptr(V32{1}, V32{1}, true), (V64{0, 1}));
  EXPECT_EQ(mask_indptr(V32{}, V32{}, true), (V64{0}));
  EXPECT_EQ(mask_indptr(V32{}, V32{}, false), (V64{0}));
}

TEST(MaskIndptr, RandomAgainstDefinition) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int32_t> len(0, 300);
  V32 qo(64), kv(64);
  for (std::size_t i = 0; i < qo.size(); ++i) qo[i] = len(rng), kv[i] = len(rng);
  const V64 elements = mask_indptr(qo, kv, false), bytes = mask_indptr(qo, kv, true);
  ASSERT_EQ(elements.size(), 65u);
  ASSERT_EQ(bytes.size(), 65u);
  std::int64_t e = 0, b = 0;
  for (std::size_t i = 0; i < qo.size(); ++i) {
    const std::int64_t n = std::int64_t(qo[i]) * kv[i];
    e += n;
    b += n / 8 + (n % 8 != 0);
    EXPECT_EQ(elements[i + 1], e);
    EXPECT_EQ(bytes[i + 1], b);
  }
}

TEST(MaskIndptr, Errors) {
  expect_error([] { mask_indptr(V32{1, 2}, V32{3}, false); }, "kv_lens.size()");
  expect_error([] { mask_indptr(V32{1, -2}, V32{3, 4}, true); }, "qo_lens[1]");
  expect_error([] { mask_indptr(V32{1, 2}, V32{-3, 4}, true); }, "kv_lens[0]");
}

}  // namespace
}  // namespace kvinfer
