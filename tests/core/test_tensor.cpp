// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <numeric>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer {
namespace {

TEST(TensorView, ContiguousStridesAndViews) {
  Tensor t = Tensor::empty({4, 2, 16, 8, 128}, DType::kBF16);
  const TensorView& v = t.view();
  EXPECT_EQ(v.rank(), 5);
  EXPECT_EQ(v.stride(0), 2 * 16 * 8 * 128);
  EXPECT_EQ(v.stride(-1), 1);
  EXPECT_TRUE(v.is_contiguous());
  const TensorView k = v.select(1, 0);
  EXPECT_EQ(k.rank(), 4);
  EXPECT_EQ(k.stride(0), 2 * 16 * 8 * 128);
  EXPECT_FALSE(k.is_contiguous());
  EXPECT_TRUE(k.last_dim_contiguous());
  const TensorView vv = v.select(1, 1);
  EXPECT_EQ(static_cast<char*>(vv.data()) - static_cast<char*>(v.data()), 16 * 8 * 128 * 2);
  const TensorView s = v.slice(-1, 64, 128);
  EXPECT_EQ(s.size(-1), 64);
  EXPECT_EQ(static_cast<char*>(s.data()) - static_cast<char*>(v.data()), 64 * 2);
  EXPECT_EQ(v.unsqueeze(0).rank(), 6);
  EXPECT_EQ(v.describe(), "bfloat16[4, 2, 16, 8, 128] on cpu");
}

TEST(TensorView, BadIndexingThrowsError) {
  Tensor t = Tensor::empty({3, 5}, DType::kF32);
  EXPECT_THROW(t.view().size(2), Error);
  EXPECT_THROW(t.view().slice(1, 2, 6), Error);
  EXPECT_THROW(t.view().select(0, 3), Error);
  EXPECT_THROW(t.view().with_dtype(DType::kF16), Error);
}

TEST(Copy, StridedHostCopy) {
  Tensor a = Tensor::empty({6, 4}, DType::kI32);
  std::iota(a.data_as<int>(), a.data_as<int>() + 24, 0);
  Tensor b = Tensor::zeros({3, 4}, DType::kI32);
  const std::int64_t shape[] = {3, 4};
  const std::int64_t strides[] = {8, 1};  // every other row of a
  copy(b, TensorView(a.data(), DType::kI32, shape, strides));
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(b.data_as<int>()[r * 4 + c], 8 * r + c);
  EXPECT_THROW(copy(b, a), Error);
}

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i <= int(DType::kBool); ++i) {
    EXPECT_EQ(parse_dtype(dtype_name(DType(i))), DType(i));
  }
  EXPECT_EQ(parse_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("fp8"), DType::kE4M3);
  EXPECT_FALSE(parse_dtype("float7").has_value());
}

}  // namespace
}  // namespace kvinfer
