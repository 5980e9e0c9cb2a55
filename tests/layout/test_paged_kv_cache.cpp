// SPDX-License-Identifier: Apache-2.0
// The paged KV cache: views of the 5-D and pair forms, page strides, and every
// rule of the storage and page-table checks.
#include <gtest/gtest.h>

#include <vector>

#include "kvinfer/core/error.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer {
namespace {

using testing::expect_error;
using testing::int32_tensor;

constexpr std::string_view kOp = "test";

char* at(const TensorView& t) {
  return static_cast<char*>(t.data());
}

TEST(PagedKVCache, CombinedNHDViewsKAndV) {
  Tensor t = Tensor::empty({6, 2, 5, 3, 16}, DType::kBF16);
  const PagedKVCache c = PagedKVCache::combined(t, KVLayout::kNHD);
  EXPECT_EQ(c.k.data(), t.data());
  EXPECT_EQ(at(c.v) - at(c.k), 5 * 3 * 16 * 2);
  EXPECT_EQ(c.num_pages(), 6);
  EXPECT_EQ(c.page_size(), 5);
  EXPECT_EQ(c.num_heads(), 3);
  EXPECT_EQ(c.head_dim(), 16);
  const PageStrides s = page_strides(c.k, c.layout);
  EXPECT_EQ(s.page, 2 * 5 * 3 * 16);
  EXPECT_EQ(s.token, 3 * 16);
  EXPECT_EQ(s.head, 16);
  validate_paged_kv_cache(kOp, c);
}

TEST(PagedKVCache, CombinedHNDViewsKAndV) {
  Tensor t = Tensor::empty({6, 2, 3, 5, 16}, DType::kF16);
  const PagedKVCache c = PagedKVCache::combined(t, KVLayout::kHND);
  EXPECT_EQ(c.page_size(), 5);
  EXPECT_EQ(c.num_heads(), 3);
  const PageStrides s = page_strides(c.v, c.layout);
  EXPECT_EQ(s.page, 2 * 3 * 5 * 16);
  EXPECT_EQ(s.token, 16);
  EXPECT_EQ(s.head, 5 * 16);
  validate_paged_kv_cache(kOp, c);
}

TEST(PagedKVCache, LayoutIsNeverInferred) {
  // page_size == num_heads: the same tensor read both ways.
  Tensor t = Tensor::empty({2, 2, 8, 8, 64}, DType::kF16);
  const PageStrides nhd = page_strides(PagedKVCache::combined(t, KVLayout::kNHD).k, KVLayout::kNHD);
  const PageStrides hnd = page_strides(PagedKVCache::combined(t, KVLayout::kHND).k, KVLayout::kHND);
  EXPECT_EQ(nhd.token, hnd.head);
  EXPECT_EQ(nhd.head, hnd.token);
}

TEST(PagedKVCache, PairAndPageSizeOne) {
  Tensor k = Tensor::empty({4, 1, 2, 8}, DType::kE4M3);
  Tensor v = Tensor::empty({4, 1, 2, 8}, DType::kE4M3);
  const PagedKVCache c = PagedKVCache::pair(k, v);
  EXPECT_EQ(c.layout, KVLayout::kNHD);
  EXPECT_EQ(c.page_size(), 1);
  validate_paged_kv_cache(kOp, c);
}

TEST(PagedKVCache, StorageErrors) {
  Tensor t4 = Tensor::empty({4, 5, 2, 8}, DType::kF16);
  Tensor t5 = Tensor::empty({4, 3, 5, 2, 8}, DType::kF16);
  expect_error([&] { PagedKVCache::combined(t4); }, "kv_cache.shape");
  expect_error([&] { PagedKVCache::combined(t5); }, "kv_cache.shape[1]");
  expect_error([&] { PagedKVCache::combined(TensorView()); }, "kv_cache");

  Tensor k = Tensor::empty({4, 5, 2, 8}, DType::kF16);
  Tensor v_shape = Tensor::empty({4, 5, 2, 16}, DType::kF16);
  Tensor v_dtype = Tensor::empty({4, 5, 2, 8}, DType::kBF16);
  expect_error([&] { PagedKVCache::pair(k, v_shape); }, "v_cache.shape");
  expect_error([&] { PagedKVCache::pair(k, v_dtype); }, "v_cache.dtype");
  expect_error([&] { PagedKVCache::pair(k, t5); }, "v_cache.shape");
  const TensorView v_gpu(k.data(), DType::kF16, {4, 5, 2, 8}, Device::cuda(0));
  expect_error([&] { PagedKVCache::pair(k, v_gpu); }, "v_cache.device");

  // Direct construction bypasses pair(); validate catches the same.
  expect_error([&] { validate_paged_kv_cache(kOp, {k, v_dtype, KVLayout::kNHD}); }, "kv_cache.v.dtype");
  expect_error([&] { validate_paged_kv_cache(kOp, {k, v_shape, KVLayout::kNHD}); }, "kv_cache.v.shape");
  expect_error([&] { validate_paged_kv_cache(kOp, {k, TensorView(), KVLayout::kNHD}); }, "kv_cache.v");

  Tensor ints = Tensor::empty({4, 5, 2, 8}, DType::kI32);
  expect_error([&] { validate_paged_kv_cache(kOp, {ints, ints, KVLayout::kNHD}); }, "kv_cache.k.dtype");

  // Last dim with stride 2: every other element of a wider tensor.
  Tensor wide = Tensor::empty({4, 5, 2, 16}, DType::kF16);
  const std::int64_t shape[] = {4, 5, 2, 8}, strides[] = {160, 32, 16, 2};
  const TensorView strided(wide.data(), DType::kF16, shape, strides);
  expect_error(
      [&] {
        validate_paged_kv_cache(kOp, {strided, strided, KVLayout::kNHD});
      },
      "kv_cache.k.stride(-1)");

  Tensor empty_pages = Tensor::empty({4, 0, 2, 8}, DType::kF16);
  expect_error(
      [&] {
        validate_paged_kv_cache(kOp, {empty_pages, empty_pages, KVLayout::kNHD});
      },
      "page_size");
  expect_error(
      [&] {
        validate_paged_kv_cache(kOp, {empty_pages, empty_pages, KVLayout::kHND});
      },
      "num_kv_heads");
}

// A host page table from explicit arrays.
struct Table {
  Tensor indptr, indices, last;
  PageTable view() const { return {indptr, indices, last}; }
};
Table table(std::vector<std::int32_t> indptr, std::vector<std::int32_t> indices,
            std::vector<std::int32_t> last) {
  return {int32_tensor(indptr), int32_tensor(indices), int32_tensor(last)};
}

TEST(PageTable, KvLensFromPageTable) {
  // Requests: 3 pages (last 2), empty, 1 page (full), 1 page (1 token); page 2 shared.
  const Table t = table({0, 3, 3, 4, 5}, {4, 2, 0, 2, 1}, {2, 0, 4, 1});
  validate_page_table_arrays(kOp, t.view(), Device::cpu());
  EXPECT_EQ(kv_lens_from_page_table(kOp, t.view(), 4, 5), (std::vector<std::int32_t>{10, 0, 4, 1}));
  EXPECT_EQ(kv_lens_from_page_table(kOp, t.view(), 4, -1), (std::vector<std::int32_t>{10, 0, 4, 1}));
  // Page size 1: every page is full.
  const Table one = table({0, 2, 3}, {0, 1, 2}, {1, 1});
  EXPECT_EQ(kv_lens_from_page_table(kOp, one.view(), 1, 3), (std::vector<std::int32_t>{2, 1}));
  // batch_size == 0, and indices longer than used.
  const Table none = table({0}, {7, 7}, {});
  EXPECT_TRUE(kv_lens_from_page_table(kOp, none.view(), 16, 1).empty());
}

TEST(PageTable, ArrayErrors) {
  const Table good = table({0, 1, 3}, {0, 1, 2}, {3, 4});
  Tensor i64 = Tensor::zeros({3}, DType::kI64);
  expect_error(
      [&] {
        validate_page_table_arrays(kOp, {i64, good.indices, good.last}, Device::cpu());
      },
      "kv_indptr.dtype", "int32");
  expect_error(
      [&] {
        validate_page_table_arrays(kOp, {good.indptr, i64, good.last}, Device::cpu());
      },
      "kv_indices.dtype", "int32");
  Tensor i64_2 = Tensor::zeros({2}, DType::kI64);
  expect_error(
      [&] {
        validate_page_table_arrays(kOp, {good.indptr, good.indices, i64_2}, Device::cpu());
      },
      "kv_last_page_len.dtype", "int32");
  expect_error(
      [&] {
        kv_lens_from_page_table(kOp, {i64, good.indices, good.last}, 4, 3);
      },
      "kv_indptr.dtype", "int32");

  Tensor rank2 = Tensor::zeros({3, 1}, DType::kI32);
  expect_error(
      [&] {
        validate_page_table_arrays(kOp, {rank2, good.indices, good.last}, Device::cpu());
      },
      "kv_indptr.shape");
  Tensor wide = Tensor::zeros({6}, DType::kI32);
  const std::int64_t shape[] = {3}, strides[] = {2};
  const TensorView strided(wide.data(), DType::kI32, shape, strides);
  expect_error(
      [&] {
        validate_page_table_arrays(kOp, {strided, good.indices, good.last}, Device::cpu());
      },
      "kv_indptr.stride(0)");
  Tensor empty = Tensor::zeros({0}, DType::kI32);
  expect_error(
      [&] {
        validate_page_table_arrays(kOp, {empty, good.indices, empty}, Device::cpu());
      },
      "kv_indptr.shape[0]");

  const Table short_last = table({0, 1, 3}, {0, 1, 2}, {3});
  expect_error([&] { validate_page_table_arrays(kOp, short_last.view(), Device::cpu()); },
               "kv_last_page_len.shape[0]");
  expect_error([&] { validate_page_table_arrays(kOp, good.view(), Device::cuda(0)); }, "kv_indptr.device");
  const TensorView gpu_indices(good.indices.data(), DType::kI32, {3}, Device::cuda(0));
  expect_error(
      [&] {
        kv_lens_from_page_table(kOp, {good.indptr, gpu_indices, good.last}, 4, 3);
      },
      "kv_indices.device");
  expect_error([&] { kv_lens_from_page_table(kOp, good.view(), 0, 3); }, "page_size");
}

TEST(PageTable, ContentErrors) {
  // A page table (indptr, indices, last_page_len) of two requests over 8 pages of
  // `page_size`, broken in one place.
  struct Broken {
    std::vector<std::int32_t> indptr, indices, last;
    std::int64_t page_size;
    std::string_view argument, also_in_message = {};
  };
  const Broken cases[] = {
      {{1, 2, 3}, {0, 1, 2}, {1, 1}, 4, "kv_indptr[0]"},
      {{0, 2, 1}, {0, 1, 2}, {1, 1}, 4, "kv_indptr[2]"},
      {{0, 2, 4}, {0, 1, 2}, {1, 1}, 4, "kv_indices.shape[0]"},
      {{0, 2, 3}, {0, 8, 2}, {1, 1}, 4, "kv_indices[1]"},                // out of range
      {{0, 2, 3}, {0, 1, -1}, {1, 1}, 4, "kv_indices[2]"},               // negative
      {{0, 2, 3}, {0, 1, 2}, {0, 1}, 4, "kv_last_page_len[0]"},          // zero
      {{0, 2, 3}, {0, 1, 2}, {4, 5}, 4, "kv_last_page_len[1]"},          // beyond the page
      {{0, 2, 3}, {0, 1, 2}, {1, 2}, 1, "kv_last_page_len[1]"},          // page size 1
      {{0, 2, 2}, {0, 1}, {1, 3}, 4, "kv_last_page_len[1]", "no pages"},  // an empty request's
  };
  for (const Broken& c : cases) {
    SCOPED_TRACE(c.argument);
    const Table t = table(c.indptr, c.indices, c.last);
    expect_error([&] { kv_lens_from_page_table(kOp, t.view(), c.page_size, 8); }, c.argument, c.also_in_message);
  }
}

}  // namespace
}  // namespace kvinfer
