// SPDX-License-Identifier: Apache-2.0
// The MLA cache: ckv/kpe views of one tensor (no copy), the pair form, checks.
#include <gtest/gtest.h>

#include "kvinfer/core/error.hpp"
#include "kvinfer/layout/mla_cache.hpp"
#include "testing/expect_error.hpp"

namespace kvinfer {
namespace {

using testing::expect_error;

constexpr std::string_view kOp = "test";

char* at(const TensorView& t) {
  return static_cast<char*>(t.data());
}

TEST(MLACache, CombinedSplitsWithoutCopy) {
  Tensor t = Tensor::empty({5, 16, kMlaHeadDimCkv + kMlaHeadDimKpe}, DType::kBF16);
  const MLACache c = MLACache::combined(t);
  EXPECT_EQ(c.ckv.data(), t.data());
  EXPECT_EQ(at(c.kpe) - at(c.ckv), 512 * 2);
  EXPECT_EQ(c.num_pages(), 5);
  EXPECT_EQ(c.page_size(), 16);
  EXPECT_EQ(c.head_dim_ckv(), 512);
  EXPECT_EQ(c.head_dim_kpe(), 64);
  EXPECT_EQ(c.ckv.stride(1), 576);
  EXPECT_EQ(c.kpe.stride(0), 16 * 576);
  EXPECT_EQ(c.kpe.stride(2), 1);
  validate_mla_cache(kOp, c);

  // Other widths, and a cache without a rotary part.
  Tensor small = Tensor::empty({3, 1, 40}, DType::kF16);
  const MLACache s = MLACache::combined(small, 32);
  EXPECT_EQ(s.head_dim_ckv(), 32);
  EXPECT_EQ(s.head_dim_kpe(), 8);
  const MLACache no_kpe = MLACache::combined(small, 40);
  EXPECT_FALSE(no_kpe.kpe.defined());
  EXPECT_EQ(no_kpe.head_dim_kpe(), 0);
  validate_mla_cache(kOp, no_kpe);
}

TEST(MLACache, Pair) {
  Tensor ckv = Tensor::empty({5, 16, 512}, DType::kE4M3);
  Tensor kpe = Tensor::empty({5, 16, 64}, DType::kE4M3);
  validate_mla_cache(kOp, MLACache::pair(ckv, kpe));
  validate_mla_cache(kOp, MLACache::pair(ckv, TensorView()));
}

TEST(MLACache, Errors) {
  Tensor t = Tensor::empty({5, 16, 576}, DType::kBF16);
  expect_error([&] { MLACache::combined(t, 577); }, "head_dim_ckv");
  expect_error([&] { MLACache::combined(t, 0); }, "head_dim_ckv");
  Tensor rank4 = Tensor::empty({5, 16, 1, 576}, DType::kBF16);
  expect_error([&] { MLACache::combined(rank4); }, "mla_cache.shape");
  expect_error([&] { MLACache::pair(rank4, TensorView()); }, "ckv_cache.shape");

  Tensor ckv = Tensor::empty({5, 16, 512}, DType::kBF16);
  expect_error(
      [&] {
        validate_mla_cache(kOp, MLACache::pair(ckv, Tensor::empty({4, 16, 64}, DType::kBF16)));
      },
      "kpe_cache.shape[0]");
  expect_error(
      [&] {
        validate_mla_cache(kOp, MLACache::pair(ckv, Tensor::empty({5, 8, 64}, DType::kBF16)));
      },
      "kpe_cache.shape[1]");
  expect_error(
      [&] {
        validate_mla_cache(kOp, MLACache::pair(ckv, Tensor::empty({5, 16, 64}, DType::kF16)));
      },
      "kpe_cache.dtype");
  const TensorView gpu_kpe(t.data(), DType::kBF16, {5, 16, 64}, Device::cuda(0));
  expect_error([&] { validate_mla_cache(kOp, MLACache::pair(ckv, gpu_kpe)); }, "kpe_cache.device");
  Tensor ints = Tensor::empty({5, 16, 512}, DType::kI32);
  expect_error([&] { validate_mla_cache(kOp, MLACache::pair(ints, TensorView())); }, "ckv_cache.dtype");
  const std::int64_t shape[] = {5, 16, 256}, strides[] = {16 * 576, 576, 2};
  const TensorView strided(t.data(), DType::kBF16, shape, strides);
  expect_error([&] { validate_mla_cache(kOp, MLACache::pair(strided, TensorView())); },
               "ckv_cache.stride(-1)");
  expect_error(
      [&] {
        validate_mla_cache(kOp, MLACache::pair(Tensor::empty({5, 0, 512}, DType::kBF16), {}));
      },
      "page_size");
}

}  // namespace
}  // namespace kvinfer
