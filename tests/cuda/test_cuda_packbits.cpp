// SPDX-License-Identifier: Apache-2.0
// packbits and segment_packbits on the GPU against the CPU backend, byte for byte:
// both bit orders, bool and uint8 input (any non-zero byte is true), lengths around
// byte boundaries, unaligned inputs, empty and ragged segments, device or host indptr.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "kvinfer/ops/packbits.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

// n random elements starting `offset` bytes into a buffer (so the GPU sees every
// alignment); uint8 values are arbitrary bytes, a third of them zero.
struct Bits {
  Mirror storage;
  TensorView view;
};
Bits random_bits(std::int64_t n, std::int64_t offset, DType dtype, Rng& rng) {
  Tensor t = Tensor::empty({n + offset}, dtype);
  auto* p = t.data_as<std::uint8_t>();
  std::uniform_int_distribution<int> byte(0, 255), third(0, 2);
  for (std::int64_t i = 0; i < n + offset; ++i) {
    p[i] =
        dtype == DType::kBool ? std::uint8_t(byte(rng) & 1) : (third(rng) == 0 ? 0 : std::uint8_t(byte(rng)));
  }
  const TensorView v = t.view().slice(0, offset, offset + n);
  return {Mirror(std::move(t)), v};
}

TEST(CudaPackbits, MatchesCpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  Rng rng(5);
  for (const std::int64_t n : {0, 1, 7, 8, 9, 63, 64, 65, 1000, (1 << 20) + 3}) {
    for (const std::int64_t offset : {0, 1, 5, 8}) {
      for (const DType dtype : {DType::kBool, DType::kU8}) {
        for (const BitOrder order : {BitOrder::kBig, BitOrder::kLittle}) {
          Bits x = random_bits(n, offset, dtype, rng);
          Mirror out(Tensor::empty({packed_size(n)}, DType::kU8));
          out.poison();
          packbits(x.view, out.host, order);
          packbits(x.storage.on_dev(x.view), out.dev, order);
          EXPECT_TRUE(out.same_bytes())
              << "n " << n << ", offset " << offset << ", " << dtype_name(dtype) << ", order " << int(order);
        }
      }
    }
  }
}

TEST(CudaPackbits, KnownPattern) {
  KVINFER_SKIP_WITHOUT_GPU();
  // numpy: packbits([1,0,0,0,0,0,0,1, 1,1]) = [0x81, 0xC0]; little: [0x81, 0x03].
  const std::vector<std::uint8_t> bits{1, 0, 0, 0, 0, 0, 0, 1, 1, 1};
  Tensor x = Tensor::empty({10}, DType::kU8);
  std::copy(bits.begin(), bits.end(), x.data_as<std::uint8_t>());
  const Tensor xd = x.to(Device::cuda(0));
  for (const auto& [order, want] : {std::pair{BitOrder::kBig, std::vector<std::uint8_t>{0x81, 0xC0}},
                                    std::pair{BitOrder::kLittle, std::vector<std::uint8_t>{0x81, 0x03}}}) {
    const Tensor out = packbits(xd, order).to(Device::cpu());
    ASSERT_EQ(out.numel(), 2);
    EXPECT_EQ(out.data_as<std::uint8_t>()[0], want[0]);
    EXPECT_EQ(out.data_as<std::uint8_t>()[1], want[1]);
  }
}

TEST(CudaSegmentPackbits, MatchesCpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  Rng rng(6);
  const std::vector<std::vector<std::int32_t>> length_sets = {
      {},                         // batch 0
      {0, 0},                     // only empty segments
      {1, 0, 7, 8, 9, 0, 16, 3},  // around byte boundaries, empty ones between
      {100000, 13, 0, 65537},     // long segments
  };
  std::vector<std::int32_t> ragged(300);
  std::uniform_int_distribution<int> len(0, 300);
  for (auto& l : ragged) l = len(rng);  // e.g. qo_len * kv_len blocks of a mask
  std::vector<std::vector<std::int32_t>> sets = length_sets;
  sets.push_back(ragged);
  for (const auto& lengths : sets) {
    std::vector<std::int32_t> indptr{0};
    for (std::int32_t l : lengths) indptr.push_back(indptr.back() + l);
    const std::int64_t n = indptr.back();
    for (const std::int64_t offset : {0, 3}) {
      for (const BitOrder order : {BitOrder::kBig, BitOrder::kLittle}) {
        Bits x = random_bits(n, offset, DType::kBool, rng);
        const Tensor indptr_h = int32_tensor(indptr);
        const SegmentPacked want = segment_packbits(x.view, indptr_h, order);
        for (const bool indptr_on_device : {true, false}) {
          const Tensor indptr_d = indptr_h.to(Device::cuda(0));
          const SegmentPacked got = segment_packbits(
              x.storage.on_dev(x.view), indptr_on_device ? indptr_d.view() : indptr_h.view(), order);
          ASSERT_TRUE(got.data.device().is_cuda());
          EXPECT_EQ(to_vector_i32(got.indptr.to(Device::cpu())), to_vector_i32(want.indptr));
          const Tensor data = got.data.to(Device::cpu());
          ASSERT_EQ(data.numel(), want.data.numel());
          EXPECT_EQ(std::memcmp(data.data(), want.data.data(), std::size_t(data.numel())), 0)
              << lengths.size() << " segments, offset " << offset << ", order " << int(order);
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvinfer::testing
