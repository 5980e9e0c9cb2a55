// SPDX-License-Identifier: Apache-2.0
// packbits / segment_packbits on the CPU against a bit-by-bit definition of
// numpy.packbits, both bit orders.
#include <gtest/gtest.h>

#include <vector>

#include "kvinfer/core/error.hpp"
#include "kvinfer/ops/packbits.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer {
namespace {

using testing::expect_error;
using testing::int32_tensor;
using testing::Rng;

// Bit k (LSB = 0) of a byte holds which element: numpy's definition.
std::vector<std::uint8_t> reference(const std::uint8_t* x, std::int64_t n, BitOrder order) {
  std::vector<std::uint8_t> out(std::size_t((n + 7) / 8), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    if (x[i] == 0) continue;
    const int bit = order == BitOrder::kLittle ? int(i % 8) : 7 - int(i % 8);
    out[std::size_t(i / 8)] |= std::uint8_t(1u << bit);
  }
  return out;
}

std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  const auto* p = t.data_as<std::uint8_t>();
  return {p, p + t.numel()};
}

TEST(PackBits, KnownBytes) {
  const std::uint8_t bits[] = {1, 0, 1, 1, 0, 0, 0, 0, 1, 1};  // numpy: [176, 192] big, [13, 3] little
  const TensorView x(const_cast<std::uint8_t*>(bits), DType::kBool, {10});
  EXPECT_EQ(bytes_of(packbits(x)), (std::vector<std::uint8_t>{176, 192}));
  EXPECT_EQ(bytes_of(packbits(x, BitOrder::kLittle)), (std::vector<std::uint8_t>{13, 3}));
  // uint8 input: any non-zero byte is true.
  std::uint8_t values[] = {0, 2, 255, 0, 0, 0, 0, 9};
  const TensorView u(values, DType::kU8, {8});
  EXPECT_EQ(bytes_of(packbits(u)), (std::vector<std::uint8_t>{0b01100001}));
}

TEST(PackBits, SizesAndOrders) {
  Rng rng(1);
  for (std::int64_t n : {0, 1, 7, 8, 9, 10, 99, 128, 999, 5000, 131072, 999999, 1000000}) {
    const Tensor x = testing::random_bools(n, rng);
    for (BitOrder order : {BitOrder::kBig, BitOrder::kLittle}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << (order == BitOrder::kBig ? " big" : " little"));
      const Tensor got = packbits(x, order);
      ASSERT_EQ(got.numel(), packed_size(n));
      EXPECT_EQ(got.dtype(), DType::kU8);
      EXPECT_EQ(bytes_of(got), reference(x.data_as<std::uint8_t>(), n, order));
      // The form with a caller-given output buffer.
      Tensor out = Tensor::zeros({packed_size(n)}, DType::kU8);
      packbits(x, out, order);
      EXPECT_EQ(bytes_of(out), bytes_of(got));
    }
  }
}

TEST(SegmentPackBits, BatchSizesAndOrders) {
  Rng rng(2);
  for (int batch_size : {0, 1, 10, 99, 128, 777}) {
    // Segment i has length i.
    std::vector<std::int32_t> indptr{0};
    for (int i = 0; i < batch_size; ++i) indptr.push_back(indptr.back() + i);
    const Tensor x = testing::random_bools(indptr.back(), rng);
    for (BitOrder order : {BitOrder::kBig, BitOrder::kLittle}) {
      SCOPED_TRACE(::testing::Message()
                   << "batch_size " << batch_size << (order == BitOrder::kBig ? " big" : " little"));
      const SegmentPacked got = segment_packbits(x, int32_tensor(indptr), order);
      ASSERT_EQ(got.indptr.dtype(), DType::kI32);
      ASSERT_EQ(got.indptr.numel(), batch_size + 1);
      const auto* out_indptr = got.indptr.data_as<std::int32_t>();
      std::vector<std::uint8_t> want;
      EXPECT_EQ(out_indptr[0], 0);
      for (int i = 0; i < batch_size; ++i) {
        const std::vector<std::uint8_t> seg =
            reference(x.data_as<std::uint8_t>() + indptr[i], indptr[i + 1] - indptr[i], order);
        want.insert(want.end(), seg.begin(), seg.end());
        EXPECT_EQ(out_indptr[i + 1], std::int32_t(want.size())) << "segment " << i;
      }
      EXPECT_EQ(bytes_of(got.data), want);
    }
  }
}

TEST(PackBits, Errors) {
  Tensor x = Tensor::zeros({10}, DType::kBool);
  expect_error([&] { packbits(Tensor::zeros({2, 5}, DType::kBool)); }, "x.shape");
  expect_error([&] { packbits(Tensor::zeros({10}, DType::kF32)); }, "x.dtype");
  expect_error([&] { packbits(x, Tensor::zeros({1}, DType::kU8)); }, "out.shape[0]");
  expect_error([&] { packbits(x, Tensor::zeros({2}, DType::kI32)); }, "out.dtype");
  expect_error([&] { packbits(TensorView()); }, "x");
  Tensor wide = Tensor::zeros({20}, DType::kBool);
  const std::int64_t shape[] = {10}, strides[] = {2};
  expect_error([&] { packbits(TensorView(wide.data(), DType::kBool, shape, strides)); }, "x.stride(-1)");
  const TensorView gpu_out(wide.data(), DType::kU8, {2}, Device::cuda(0));
  expect_error([&] { packbits(x, gpu_out); }, "out.device");
  if (!cuda_backend_built()) {
    const TensorView gpu_x(wide.data(), DType::kBool, {10}, Device::cuda(0));
    expect_error([&] { packbits(gpu_x); }, "x.device", "CUDA backend is not built");
  }
}

TEST(SegmentPackBits, Errors) {
  Tensor x = Tensor::zeros({10}, DType::kBool);
  using V = std::vector<std::int32_t>;
  expect_error([&] { segment_packbits(x, Tensor::zeros({3}, DType::kI64)); }, "indptr.dtype", "int32");
  expect_error([&] { segment_packbits(x, int32_tensor(V{0, 4, 9})); }, "indptr[2]");
  expect_error([&] { segment_packbits(x, int32_tensor(V{0, 6, 4, 10})); }, "indptr[2]");
  expect_error([&] { segment_packbits(x, int32_tensor(V{2, 10})); }, "indptr[0]");
  expect_error([&] { segment_packbits(x, int32_tensor(V{})); }, "indptr.shape[0]");
  expect_error(
      [&] {
        segment_packbits(Tensor::zeros({10}, DType::kI32), int32_tensor(V{0, 10}));
      },
      "x.dtype");
}

}  // namespace
}  // namespace kvinfer
