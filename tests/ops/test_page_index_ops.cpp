// SPDX-License-Identifier: Apache-2.0
// get_batch_indices_positions and get_seq_lens on the CPU, against their formulas.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kvinfer/core/error.hpp"
#include "kvinfer/ops/page.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer {
namespace {

using testing::expect_error;
using testing::int32_tensor;
using testing::to_vector_i32;
using V = std::vector<std::int32_t>;

TEST(GetBatchIndicesPositions, Example) {
  // Request 0 appends 2 tokens to a sequence now 5 long, request 1 none, request 2 three (a prefill).
  Tensor batch = Tensor::empty({5}, DType::kI32), pos = Tensor::empty({5}, DType::kI32);
  get_batch_indices_positions(int32_tensor(V{0, 2, 2, 5}), int32_tensor(V{5, 4, 3}), batch, pos);
  EXPECT_EQ(to_vector_i32(batch), (V{0, 0, 2, 2, 2}));
  EXPECT_EQ(to_vector_i32(pos), (V{3, 4, 0, 1, 2}));
}

TEST(GetBatchIndicesPositions, RandomAgainstFormula) {
  std::mt19937_64 rng(11);
  for (int batch_size : {0, 1, 7, 64, 300}) {
    V indptr{0}, seq_lens;
    for (int b = 0; b < batch_size; ++b) {
      const std::int32_t append = std::uniform_int_distribution<std::int32_t>(0, 40)(rng);
      indptr.push_back(indptr.back() + append);
      seq_lens.push_back(append + std::uniform_int_distribution<std::int32_t>(0, 1000)(rng));
    }
    const std::int64_t nnz = indptr.back();
    Tensor batch = Tensor::empty({nnz}, DType::kI32), pos = Tensor::empty({nnz}, DType::kI32);
    get_batch_indices_positions(int32_tensor(indptr), int32_tensor(seq_lens), batch, pos);
    const V got_batch = to_vector_i32(batch), got_pos = to_vector_i32(pos);
    for (int b = 0; b < batch_size; ++b) {
      for (std::int32_t t = indptr[b]; t < indptr[b + 1]; ++t) {
        EXPECT_EQ(got_batch[t], b);
        EXPECT_EQ(got_pos[t], seq_lens[b] - (indptr[b + 1] - indptr[b]) + (t - indptr[b]));
      }
    }
  }
}

TEST(GetBatchIndicesPositions, Errors) {
  Tensor batch = Tensor::empty({3}, DType::kI32), pos = Tensor::empty({3}, DType::kI32);
  Tensor indptr = int32_tensor(V{0, 1, 3}), seq_lens = int32_tensor(V{4, 2});
  get_batch_indices_positions(indptr, seq_lens, batch, pos);
  expect_error([&] { get_batch_indices_positions(Tensor::zeros({3}, DType::kI64), seq_lens, batch, pos); },
               "append_indptr.dtype", "int32");
  expect_error([&] { get_batch_indices_positions(indptr, Tensor::zeros({2}, DType::kI64), batch, pos); },
               "seq_lens.dtype", "int32");
  expect_error([&] { get_batch_indices_positions(indptr, int32_tensor(V{4}), batch, pos); },
               "seq_lens.shape[0]");
  expect_error([&] { get_batch_indices_positions(indptr, seq_lens, batch, Tensor::empty({2}, DType::kI32)); },
               "positions.shape[0]");
  expect_error([&] { get_batch_indices_positions(indptr, seq_lens, Tensor::empty({3}, DType::kI64), pos); },
               "batch_indices.dtype", "int32");
  // Outputs of another length than the appended tokens (append_indptr[batch_size]).
  expect_error(
      [&] {
        get_batch_indices_positions(int32_tensor(V{0, 1, 4}), int32_tensor(V{4, 3}), batch, pos);
      },
      "batch_indices.shape[0]", "append_indptr[batch_size] = 4");
  Tensor batch4 = Tensor::empty({4}, DType::kI32), pos4 = Tensor::empty({4}, DType::kI32);
  expect_error([&] { get_batch_indices_positions(indptr, seq_lens, batch4, pos4); }, "batch_indices.shape[0]",
               "append_indptr[batch_size] = 3");
  expect_error([&] { get_batch_indices_positions(indptr, seq_lens, batch4, pos); }, "positions.shape[0]");
  expect_error(
      [&] {
        get_batch_indices_positions(int32_tensor(V{1, 1, 3}), seq_lens, batch, pos);
      },
      "append_indptr[0]");
  expect_error(
      [&] {
        get_batch_indices_positions(int32_tensor(V{0, 2, 1}), seq_lens, batch, pos);
      },
      "append_indptr[2]");
  // A sequence shorter than its append (the lengths count the appended tokens).
  expect_error(
      [&] {
        get_batch_indices_positions(indptr, int32_tensor(V{4, 1}), batch, pos);
      },
      "seq_lens[1]", "2 appended token(s) of request 1");
  expect_error(
      [&] {
        get_batch_indices_positions(indptr, int32_tensor(V{0, 2}), batch, pos);
      },
      "seq_lens[0]");
  expect_error(
      [&] {
        get_batch_indices_positions(indptr, int32_tensor(V{-1, 2}), batch, pos);
      },
      "seq_lens[0]");
  const TensorView gpu_pos(pos.data(), DType::kI32, {3}, Device::cuda(0));
  expect_error([&] { get_batch_indices_positions(indptr, seq_lens, batch, gpu_pos); }, "positions.device");
}

TEST(GetSeqLens, RandomAgainstFormula) {
  std::mt19937_64 rng(12);
  for (std::int64_t page_size : {1, 5, 16}) {
    for (int batch_size : {0, 1, 9, 200}) {
      V indptr{0}, last;
      for (int b = 0; b < batch_size; ++b) {
        const std::int32_t pages = std::uniform_int_distribution<std::int32_t>(0, 6)(rng);
        indptr.push_back(indptr.back() + pages);
        last.push_back(
            pages == 0 ? 0 : std::uniform_int_distribution<std::int32_t>(1, std::int32_t(page_size))(rng));
      }
      Tensor out = Tensor::empty({batch_size}, DType::kI32);
      get_seq_lens(int32_tensor(indptr), int32_tensor(last), page_size, out);
      const V got = to_vector_i32(out);
      for (int b = 0; b < batch_size; ++b) {
        const std::int32_t pages = indptr[b + 1] - indptr[b];
        EXPECT_EQ(got[b], pages == 0 ? 0 : (pages - 1) * page_size + last[b]) << "request " << b;
      }
    }
  }
}

TEST(GetSeqLens, Errors) {
  Tensor indptr = int32_tensor(V{0, 2, 2}), last = int32_tensor(V{3, 0}),
         out = Tensor::empty({2}, DType::kI32);
  get_seq_lens(indptr, last, 4, out);
  EXPECT_EQ(to_vector_i32(out), (V{7, 0}));
  expect_error([&] { get_seq_lens(indptr, last, 0, out); }, "page_size");
  expect_error([&] { get_seq_lens(Tensor::zeros({3}, DType::kI64), last, 4, out); }, "kv_indptr.dtype",
               "int32");
  expect_error([&] { get_seq_lens(indptr, Tensor::zeros({2}, DType::kI64), 4, out); },
               "kv_last_page_len.dtype", "int32");
  expect_error([&] { get_seq_lens(indptr, int32_tensor(V{3}), 4, out); }, "kv_last_page_len.shape[0]");
  expect_error([&] { get_seq_lens(indptr, last, 4, Tensor::empty({3}, DType::kI32)); }, "seq_lens.shape[0]");
  expect_error([&] { get_seq_lens(int32_tensor(V{0, 3, 2}), last, 4, out); }, "kv_indptr[2]");
  // A last page fuller than a page, or empty (or negative) in a request with pages.
  expect_error(
      [&] {
        get_seq_lens(indptr, int32_tensor(V{5, 0}), 4, out);
      },
      "kv_last_page_len[0]", "must be in [1, page_size = 4] for a request with 2 page(s)");
  expect_error(
      [&] {
        get_seq_lens(indptr, int32_tensor(V{0, 0}), 4, out);
      },
      "kv_last_page_len[0]", "must be in [1, page_size = 4]");
  expect_error([&] { get_seq_lens(indptr, int32_tensor(V{-3, 0}), 4, out); }, "kv_last_page_len[0]");
  EXPECT_NO_THROW(get_seq_lens(indptr, int32_tensor(V{4, 0}), 4, out));  // a full last page
  EXPECT_EQ(to_vector_i32(out), (V{8, 0}));
  // A request without pages has last_page_len 0.
  expect_error(
      [&] {
        get_seq_lens(indptr, int32_tensor(V{3, 2}), 4, out);
      },
      "kv_last_page_len[1]", "no pages");
}

}  // namespace
}  // namespace kvinfer
