// SPDX-License-Identifier: Apache-2.0
// The memory behind tensor arguments: a null or misaligned data pointer, a tensor on
// another device, and a view too small for its shape and strides (when it knows its
// extent) give kvinfer::Error naming the argument before any kernel reads the memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer {
namespace {

constexpr std::int64_t kHq = 4, kHk = 2, kD = 64, kPage = 4;

// Runs `f`, which must throw kvinfer::Error for `argument` with `rule_part` in its rule.
template <class F>
void expect_error(F&& f, const std::string& argument, const std::string& rule_part) {
  try {
    f();
    ADD_FAILURE() << "no kvinfer::Error (expected one for " << argument << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(e.rule().find(rule_part), std::string::npos) << e.what();
  }
}

// A planned decode of two requests (6 and 3 tokens) over a pool of 4 pages, and its
// valid arguments; each test breaks one of them.
struct Decode {
  std::vector<std::int32_t> indptr{0, 2, 3}, indices{3, 0, 2}, last_page_len{2, 3};
  Tensor cache = Tensor::zeros({4, 2, kPage, kHk, kD}, DType::kBF16);
  Tensor q = Tensor::zeros({2, kHq, kD}, DType::kBF16);
  Tensor out = Tensor::empty({2, kHq, kD}, DType::kBF16);
  Tensor lse = Tensor::empty({2, kHq}, DType::kF32);
  BatchDecodeWithPagedKVCache wrapper{Device::cpu()};

  Decode() {
    const PageTable table{.indptr = TensorView(indptr.data(), DType::kI32, {3}),
                          .indices = TensorView(indices.data(), DType::kI32, {3}),
                          .last_page_len = TensorView(last_page_len.data(), DType::kI32, {2})};
    wrapper.plan(
        {.page_table = table, .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage});
  }
  void run(const TensorView& q_arg, const TensorView& out_arg, const TensorView& lse_arg) const {
    wrapper.run(q_arg, PagedKVCache::combined(cache), out_arg, {.lse = lse_arg});
  }
  // A view of `t`'s memory shifted by `bytes` (same shape, no known extent).
  static TensorView shifted(const Tensor& t, std::ptrdiff_t bytes) {
    return TensorView(static_cast<char*>(t.data()) + bytes, t.dtype(), t.view().shape());
  }
};

TEST(TensorEdges, ValidArgumentsRun) {
  Decode d;
  d.run(d.q, d.out, d.lse);
  // All-zero keys: LSE = log2(kv_len).
  EXPECT_NEAR(d.lse.data_as<float>()[0], 2.5849625, 1e-5);
  EXPECT_NEAR(d.lse.data_as<float>()[kHq], 1.5849625, 1e-5);
}

TEST(TensorEdges, NullDataPointerNamesTheArgument) {
  Decode d;
  const TensorView null_q(nullptr, DType::kBF16, {2, kHq, kD});
  expect_error([&] { d.run(null_q, d.out, d.lse); }, "q.data", "needs memory");
  const TensorView null_out(nullptr, DType::kBF16, {2, kHq, kD});
  expect_error([&] { d.run(d.q, null_out, d.lse); }, "out.data", "needs memory");
  const TensorView null_lse(nullptr, DType::kF32, {2, kHq});
  expect_error([&] { d.run(d.q, d.out, null_lse); }, "lse.data", "needs memory");
  const TensorView null_cache(nullptr, DType::kBF16, {4, 2, kPage, kHk, kD});
  expect_error([&] { d.wrapper.run(d.q, PagedKVCache::combined(null_cache), d.out); }, "kv_cache.data",
               "needs memory");
}

TEST(TensorEdges, NullDataPointerOfAnEmptyTensorIsAccepted) {
  // No elements: nothing is read, so no memory is needed (batch_size 0, nnz 0).
  BatchDecodeWithPagedKVCache w(Device::cpu());
  std::vector<std::int32_t> indptr{0};
  const PageTable table{.indptr = TensorView(indptr.data(), DType::kI32, {1}),
                        .indices = TensorView(nullptr, DType::kI32, {0}),
                        .last_page_len = TensorView(nullptr, DType::kI32, {0})};
  w.plan({.page_table = table, .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage});
  Tensor cache = Tensor::zeros({1, 2, kPage, kHk, kD}, DType::kBF16);
  EXPECT_NO_THROW(w.run(TensorView(nullptr, DType::kBF16, {0, kHq, kD}), PagedKVCache::combined(cache),
                        TensorView(nullptr, DType::kBF16, {0, kHq, kD})));
  EXPECT_NO_THROW(copy(TensorView(nullptr, DType::kF32, {0, 3}), TensorView(nullptr, DType::kF32, {0, 3})));
}

TEST(TensorEdges, MisalignedDataPointerNamesTheArgument) {
  Decode d;
  // Room for a shifted view: one element more than q.
  Tensor q_room = Tensor::zeros({2 * kHq * kD + 1}, DType::kBF16);
  const TensorView odd_q(static_cast<char*>(q_room.data()) + 1, DType::kBF16, {2, kHq, kD});
  expect_error([&] { d.run(odd_q, d.out, d.lse); }, "q.data",
               "aligned to the element size of bfloat16 (2 bytes)");
  Tensor lse_room = Tensor::empty({2 * kHq + 1}, DType::kF32);
  const TensorView odd_lse(static_cast<char*>(lse_room.data()) + 2, DType::kF32, {2, kHq});
  expect_error([&] { d.run(d.q, d.out, odd_lse); }, "lse.data",
               "aligned to the element size of float32 (4 bytes)");
  // Whole elements further on are fine.
  const TensorView next_q(static_cast<char*>(q_room.data()) + 2, DType::kBF16, {2, kHq, kD});
  EXPECT_NO_THROW(d.run(next_q, d.out, d.lse));
}

TEST(TensorEdges, DeviceMismatchNamesTheArgument) {
  Decode d;
  const TensorView gpu_q(d.q.data(), DType::kBF16, {2, kHq, kD}, Device::cuda(0));
  expect_error([&] { d.run(gpu_q, d.out, d.lse); }, "q.device", "must be on cpu");
  const TensorView gpu_lse(d.lse.data(), DType::kF32, {2, kHq}, Device::cuda(1));
  expect_error([&] { d.run(d.q, d.out, gpu_lse); }, "lse.device", "must be on cpu");
}

TEST(TensorEdges, OwningTensorsAndTheirViewsKnowTheirExtent) {
  Tensor t = Tensor::empty({4, 2, 16, 8, 128}, DType::kBF16);
  const TensorView& v = t.view();
  ASSERT_TRUE(v.has_extent());
  EXPECT_EQ(v.extent_begin(), t.data());
  EXPECT_EQ(v.extent_bytes(), std::int64_t(t.nbytes()));
  const TensorView k = v.select(1, 1).slice(-1, 64, 128);
  EXPECT_TRUE(k.has_extent());
  EXPECT_EQ(k.extent_begin(), t.data());
  EXPECT_FALSE(TensorView(t.data(), DType::kBF16, {4}).has_extent());
  // Derived views stay inside: every check passes.
  Tensor dst = Tensor::empty({4, 16, 8, 64}, DType::kBF16);
  EXPECT_NO_THROW(copy(dst, k));
}

TEST(TensorEdges, ViewTooSmallForItsShapeNamesTheArgument) {
  Decode d;
  // q's memory given with its size, one element short of the shape.
  const TensorView short_q(d.q.data(), d.q.nbytes() - 2, DType::kBF16, {2, kHq, kD});
  expect_error([&] { d.run(short_q, d.out, d.lse); }, "q", "too small");
  const TensorView exact_q(d.q.data(), d.q.nbytes(), DType::kBF16, {2, kHq, kD});
  EXPECT_NO_THROW(d.run(exact_q, d.out, d.lse));
  // A cache whose declared buffer holds 3 of its 4 pages.
  const std::size_t page_bytes = 2 * kPage * kHk * kD * 2;
  const TensorView short_cache(d.cache.data(), 3 * page_bytes, DType::kBF16, {4, 2, kPage, kHk, kD});
  expect_error([&] { d.wrapper.run(d.q, PagedKVCache::combined(short_cache), d.out); }, "kv_cache",
               "too small");
  // The same through the K/V pair form, where only V is short.
  const TensorView k = d.cache.view().select(1, 0), v = d.cache.view().select(1, 1);
  const std::int64_t shape[] = {4, kPage, kHk, kD};
  const std::int64_t strides[] = {2 * kPage * kHk * kD, kHk * kD, kD, 1};
  const TensorView short_v(v.data(), 3 * page_bytes, DType::kBF16, shape, strides);
  expect_error([&] { d.wrapper.run(d.q, PagedKVCache::pair(k, short_v), d.out); }, "v_cache", "too small");
}

TEST(TensorEdges, ViewTooSmallForItsStridesNamesTheArgument) {
  Decode d;
  // A row stride past the buffer: the shape fits, the strides do not.
  const std::int64_t shape[] = {2, kHq, kD};
  const std::int64_t wide[] = {2 * kHq * kD, kD, 1};
  const TensorView wide_out(d.out.data(), d.out.nbytes(), DType::kBF16, shape, wide);
  expect_error([&] { d.run(d.q, wide_out, d.lse); }, "out", "too small");
  // A negative stride: from the start of the buffer it reaches before it.
  const std::int64_t back[] = {-kHq * kD, kD, 1};
  const TensorView backwards(d.out.data(), d.out.nbytes(), DType::kBF16, shape, back);
  expect_error([&] { d.run(d.q, backwards, d.lse); }, "out", "too small");
  const std::int64_t huge[] = {std::int64_t(1) << 62, kD, 1};
  const TensorView overflowing(d.out.data(), d.out.nbytes(), DType::kBF16, shape, huge);
  expect_error([&] { d.run(d.q, overflowing, d.lse); }, "out", "more than 2^63 bytes");
}

TEST(TensorEdges, OtherOperationsCheckTheirTensorsToo) {
  // Ragged prefill: a key buffer one token short.
  std::vector<std::int32_t> qo_indptr{0, 3}, kv_indptr{0, 5};
  BatchPrefillWithRaggedKVCache prefill(Device::cpu());
  prefill.plan({.qo_indptr = TensorView(qo_indptr.data(), DType::kI32, {2}),
                .kv_indptr = TensorView(kv_indptr.data(), DType::kI32, {2}),
                .num_qo_heads = kHq,
                .num_kv_heads = kHk,
                .head_dim_qk = kD});
  Tensor q = Tensor::zeros({3, kHq, kD}, DType::kBF16), out = Tensor::empty({3, kHq, kD}, DType::kBF16);
  Tensor k = Tensor::zeros({5, kHk, kD}, DType::kBF16), v = Tensor::zeros({5, kHk, kD}, DType::kBF16);
  const TensorView short_k(k.data(), k.nbytes() - kHk * kD * 2, DType::kBF16, {5, kHk, kD});
  expect_error([&] { prefill.run(q, short_k, v, out); }, "k", "too small");
  expect_error(
      [&] {
        prefill.run(q, k, TensorView(nullptr, DType::kBF16, {5, kHk, kD}), out);
      },
      "v.data", "needs memory");

  // merge_state: a null first state.
  Tensor va = Tensor::zeros({3, kHq, kD}, DType::kBF16), vb = Tensor::zeros({3, kHq, kD}, DType::kBF16);
  Tensor sa = Tensor::zeros({3, kHq}, DType::kF32), sb = Tensor::zeros({3, kHq}, DType::kF32);
  Tensor vo = Tensor::empty({3, kHq, kD}, DType::kBF16), so = Tensor::empty({3, kHq}, DType::kF32);
  expect_error(
      [&] {
        merge_state(TensorView(nullptr, DType::kBF16, {3, kHq, kD}), sa, vb, sb, vo, so);
      },
      "v_a.data", "needs memory");

  // copy and fill_bytes.
  expect_error([&] { copy(TensorView(nullptr, DType::kF32, {2}), sa.view().select(0, 0).slice(0, 0, 2)); },
               "dst.data", "needs memory");
  expect_error([&] { fill_bytes(TensorView(nullptr, DType::kF32, {2}), 0); }, "dst.data", "needs memory");
}

}  // namespace
}  // namespace kvinfer
