// SPDX-License-Identifier: Apache-2.0
// Ragged tensors and the KV layout names.
#include <gtest/gtest.h>

#include "kvinfer/core/error.hpp"
#include "kvinfer/layout/kv_layout.hpp"
#include "kvinfer/layout/ragged.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer {
namespace {

using testing::expect_error;
using testing::int32_tensor;

constexpr std::string_view kOp = "test";

TEST(KVLayout, Names) {
  EXPECT_EQ(parse_kv_layout("NHD"), KVLayout::kNHD);
  EXPECT_EQ(parse_kv_layout("HND"), KVLayout::kHND);
  EXPECT_EQ(parse_kv_layout(kv_layout_name(KVLayout::kHND)), KVLayout::kHND);
  EXPECT_FALSE(parse_kv_layout("NDH").has_value());
  EXPECT_FALSE(parse_kv_layout("").has_value());
}

TEST(Ragged, ValidTensorsAndLengths) {
  Tensor q = Tensor::empty({7, 4, 64}, DType::kBF16);
  Tensor indptr = int32_tensor(std::vector<std::int32_t>{0, 3, 3, 7});
  validate_ragged(kOp, "q", {q, indptr});
  EXPECT_EQ(lengths_from_indptr(kOp, "qo_indptr", indptr), (std::vector<std::int32_t>{3, 0, 4}));

  // HND: nnz is dim 1.
  Tensor k = Tensor::empty({4, 7, 64}, DType::kF16);
  const RaggedTensor hnd{k, indptr, KVLayout::kHND};
  EXPECT_EQ(hnd.nnz(), 7);
  EXPECT_EQ(hnd.num_heads(), 4);
  EXPECT_EQ(hnd.stride_token(), 64);
  validate_ragged(kOp, "k", hnd);

  // batch_size == 0 and nnz == 0.
  Tensor none = Tensor::empty({0, 4, 64}, DType::kF16);
  Tensor zero = int32_tensor(std::vector<std::int32_t>{0});
  validate_ragged(kOp, "q", {none, zero});
  EXPECT_TRUE(lengths_from_indptr(kOp, "qo_indptr", zero).empty());

  // A device indptr is checked for shape and dtype only.
  const TensorView gpu_indptr(indptr.data(), DType::kI32, {4}, Device::cuda(0));
  validate_ragged(kOp, "q", {Tensor::empty({9, 4, 64}, DType::kF16), gpu_indptr});
}

TEST(Ragged, Errors) {
  Tensor q = Tensor::empty({7, 4, 64}, DType::kBF16);
  Tensor indptr = int32_tensor(std::vector<std::int32_t>{0, 3, 3, 7});
  Tensor q2 = Tensor::empty({7, 256}, DType::kBF16);
  expect_error([&] { validate_ragged(kOp, "q", {q2, indptr}); }, "q.shape");
  Tensor i64 = Tensor::zeros({4}, DType::kI64);
  expect_error([&] { validate_ragged(kOp, "q", {q, i64}); }, "q.indptr.dtype", "int32");
  expect_error([&] { lengths_from_indptr(kOp, "qo_indptr", i64); }, "qo_indptr.dtype", "int32");
  Tensor short_nnz = int32_tensor(std::vector<std::int32_t>{0, 3, 3, 6});
  expect_error([&] { validate_ragged(kOp, "q", {q, short_nnz}); }, "q.indptr[3]");
  Tensor not_zero = int32_tensor(std::vector<std::int32_t>{1, 3, 7});
  expect_error([&] { validate_ragged(kOp, "q", {q, not_zero}); }, "q.indptr[0]");
  expect_error([&] { lengths_from_indptr(kOp, "qo_indptr", not_zero); }, "qo_indptr[0]");
  Tensor decreasing = int32_tensor(std::vector<std::int32_t>{0, 3, 2, 7});
  expect_error([&] { validate_ragged(kOp, "q", {q, decreasing}); }, "q.indptr[2]");
  expect_error([&] { lengths_from_indptr(kOp, "qo_indptr", decreasing); }, "qo_indptr[2]");
  Tensor empty = Tensor::zeros({0}, DType::kI32);
  expect_error([&] { validate_ragged(kOp, "q", {q, empty}); }, "q.indptr.shape[0]");
  expect_error([&] { lengths_from_indptr(kOp, "qo_indptr", empty); }, "qo_indptr.shape[0]");
  const TensorView gpu_indptr(indptr.data(), DType::kI32, {4}, Device::cuda(0));
  expect_error([&] { lengths_from_indptr(kOp, "qo_indptr", gpu_indptr); }, "qo_indptr.device");
  Tensor wide = Tensor::empty({7, 4, 128}, DType::kBF16);
  const std::int64_t shape[] = {7, 4, 64}, strides[] = {512, 128, 2};
  const TensorView strided(wide.data(), DType::kBF16, shape, strides);
  expect_error([&] { validate_ragged(kOp, "q", {strided, indptr}); }, "q.stride(-1)");
}

}  // namespace
}  // namespace kvinfer
