// SPDX-License-Identifier: Apache-2.0
// append_paged_kv_cache on the CPU: every written slot equals its source and no
// other byte of the cache (padding included) changes; and every input rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kvinfer/core/error.hpp"
#include "kvinfer/ops/page.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"
#include "testing/storage_copy.hpp"

namespace kvinfer::testing {
namespace {

// A cache in one of its forms, over storage filled with a random pattern.
struct TestCache {
  bool combined = true;
  KVLayout layout = KVLayout::kNHD;
  std::vector<Tensor> storage;  // 1 (5-D) or 2 (k, v)
  TensorView kv5, k4, v4;       // the views handed to the library, on `storage`

  PagedKVCache cache() const {
    return combined ? PagedKVCache::combined(kv5, layout) : PagedKVCache::pair(k4, v4, layout);
  }
};

// The views of a TestCache moved onto other buffers of the same sizes, addressed by
// the definition of the layouts (element indices, without page_strides).
struct ExpectedCache {
  bool combined;
  KVLayout layout;
  TensorView kv5, k4, v4;

  ExpectedCache(const TestCache& c, const std::vector<Tensor>& bufs)
      : combined(c.combined), layout(c.layout) {
    if (combined) {
      kv5 = rebase(c.kv5, c.storage[0], bufs[0]);
    } else {
      k4 = rebase(c.k4, c.storage[0], bufs[0]);
      v4 = rebase(c.v4, c.storage[1], bufs[1]);
    }
  }
  // Element (kv = 0 for K, 1 for V) at (page, slot, head, d).
  void* element(int kv, std::int64_t page, std::int64_t slot, std::int64_t head, std::int64_t d) const {
    const bool nhd = layout == KVLayout::kNHD;
    if (combined) {
      const std::int64_t idx[] = {page, kv, nhd ? slot : head, nhd ? head : slot, d};
      return kv5.element_ptr(idx);
    }
    const std::int64_t idx[] = {page, nhd ? slot : head, nhd ? head : slot, d};
    return (kv == 0 ? k4 : v4).element_ptr(idx);
  }
};

TestCache make_cache(bool combined, KVLayout layout, bool strided, DType dtype, std::int64_t num_pages,
                     std::int64_t page_size, std::int64_t num_heads, std::int64_t head_dim, Rng& rng) {
  TestCache c;
  c.combined = combined;
  c.layout = layout;
  const bool nhd = layout == KVLayout::kNHD;
  const std::int64_t a = nhd ? page_size : num_heads, b = nhd ? num_heads : page_size;
  if (combined) {
    const std::int64_t shape[] = {num_pages, 2, a, b, head_dim};
    const std::int64_t pad[] = {1, 1, 1, 2, 8}, none[] = {0, 0, 0, 0, 0};
    Padded p = padded(shape, dtype, std::span<const std::int64_t>(strided ? pad : none, 5));
    c.storage.push_back(std::move(p.storage));
    c.kv5 = p.view;
  } else {
    const std::int64_t shape[] = {num_pages, a, b, head_dim};
    const std::int64_t pad_k[] = {1, 0, 2, 4}, pad_v[] = {0, 1, 1, 8}, none[] = {0, 0, 0, 0};
    Padded k =
        padded(shape, dtype, std::span<const std::int64_t>(strided ? pad_k : none, 4));
    Padded v =
        padded(shape, dtype, std::span<const std::int64_t>(strided ? pad_v : none, 4));
    c.k4 = k.view;
    c.v4 = v.view;
    c.storage.push_back(std::move(k.storage));
    c.storage.push_back(std::move(v.storage));
  }
  for (const Tensor& s : c.storage) fill_random_bytes(s, rng);
  return c;
}

// Append data [nnz, H, D], random, optionally inside a padded allocation.
Padded make_input(std::int64_t nnz, std::int64_t num_heads, std::int64_t head_dim, DType dtype,
                           bool strided, Rng& rng) {
  const std::int64_t shape[] = {nnz, num_heads, head_dim};
  const std::int64_t pad[] = {0, 1, 8}, none[] = {0, 0, 0};
  Padded p = padded(shape, dtype, std::span<const std::int64_t>(strided ? pad : none, 3));
  fill_random_bytes(p.storage, rng);
  return p;
}

// Appended tokens (request, position): for each request the tail of its kv_len,
// in shuffled order.
struct Tokens {
  std::vector<std::int32_t> batch, pos;
};
Tokens tail_tokens(const std::vector<std::int32_t>& kv_lens, const std::vector<std::int32_t>& append_lens,
                   Rng& rng) {
  std::vector<std::pair<std::int32_t, std::int32_t>> all;
  for (std::size_t b = 0; b < kv_lens.size(); ++b) {
    for (std::int32_t j = kv_lens[b] - append_lens[b]; j < kv_lens[b]; ++j)
      all.emplace_back(std::int32_t(b), j);
  }
  std::shuffle(all.begin(), all.end(), rng);
  Tokens t;
  for (auto [b, p] : all) t.batch.push_back(b), t.pos.push_back(p);
  return t;
}

// Runs one append and checks the whole storage against the definition.
void check_append(const TestCache& c, const HostPageTable& table, const Tokens& tokens,
                  const TensorView& key, const TensorView& value) {
  std::vector<Tensor> expected;
  for (const Tensor& s : c.storage) expected.push_back(clone(s));
  const ExpectedCache e(c, expected);
  const std::size_t es = key.element_size();
  for (std::size_t t = 0; t < tokens.batch.size(); ++t) {
    const std::int32_t b = tokens.batch[t], p = tokens.pos[t];
    const std::int64_t page =
        table.indices.data_as<std::int32_t>()[table.indptr.data_as<std::int32_t>()[b] + p / table.page_size];
    for (std::int64_t h = 0; h < key.size(1); ++h) {
      for (std::int64_t d = 0; d < key.size(2); ++d) {
        const std::int64_t src[] = {std::int64_t(t), h, d};
        std::memcpy(e.element(0, page, p % table.page_size, h, d), key.element_ptr(src), es);
        std::memcpy(e.element(1, page, p % table.page_size, h, d), value.element_ptr(src), es);
      }
    }
  }
  Tensor batch = int32_tensor(tokens.batch), pos = int32_tensor(tokens.pos);
  append_paged_kv_cache(key, value, batch, pos, c.cache(), table.view());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(same_bytes(c.storage[i], expected[i])) << "storage " << i << " differs from the definition";
  }
}

TEST(AppendPagedKVCache, MatchesDefinitionAcrossForms) {
  const DType dtypes[] = {DType::kF16, DType::kBF16, DType::kF32, DType::kE4M3, DType::kE5M2};
  std::uint64_t seed = 1;
  for (std::int64_t page_size : {1, 5, 16}) {
    for (KVLayout layout : {KVLayout::kNHD, KVLayout::kHND}) {
      for (bool combined : {true, false}) {
        for (bool strided_cache : {false, true}) {
          for (bool strided_input : {false, true}) {
            for (DType dtype : dtypes) {
              SCOPED_TRACE(::testing::Message()
                           << "page_size " << page_size << " " << kv_layout_name(layout)
                           << (combined ? " 5-D" : " pair") << (strided_cache ? " strided cache" : "")
                           << (strided_input ? " strided input" : "") << " " << dtype_name(dtype));
              Rng rng(seed++);
              const std::int64_t num_heads = 3, head_dim = 16;
              std::uniform_int_distribution<std::int32_t> len(0, std::int32_t(3 * page_size + 3));
              std::vector<std::int32_t> kv_lens(6), append_lens(6);
              for (std::size_t b = 0; b < kv_lens.size(); ++b) {
                kv_lens[b] = b == 1 ? 0 : len(rng);   // request 1 is empty
                append_lens[b] = b == 2 ? kv_lens[b]  // request 2 is all new (a prefill)
                                        : std::uniform_int_distribution<std::int32_t>(0, kv_lens[b])(rng);
              }
              const HostPageTable table = random_page_table(kv_lens, page_size, 3, rng);
              const TestCache c = make_cache(combined, layout, strided_cache, dtype, table.num_pages,
                                             page_size, num_heads, head_dim, rng);
              const Tokens tokens = tail_tokens(kv_lens, append_lens, rng);
              const std::int64_t nnz = std::int64_t(tokens.batch.size());
              const Padded key = make_input(nnz, num_heads, head_dim, dtype, strided_input, rng);
              const Padded value = make_input(nnz, num_heads, head_dim, dtype, strided_input, rng);
              check_append(c, table, tokens, key.view, value.view);
            }
          }
        }
      }
    }
  }
}

TEST(AppendPagedKVCache, LargeHeads) {
  Rng rng(99);
  const std::vector<std::int32_t> kv_lens{1000, 17, 0, 129, 64};
  const std::vector<std::int32_t> append_lens{1000, 1, 0, 65, 64};
  const HostPageTable table = random_page_table(kv_lens, 16, 10, rng);
  const TestCache c = make_cache(true, KVLayout::kHND, false, DType::kBF16, table.num_pages, 16, 8, 128, rng);
  const Tokens tokens = tail_tokens(kv_lens, append_lens, rng);
  const std::int64_t nnz = std::int64_t(tokens.batch.size());
  // K and V as views into one [nnz, 2, H, D] tensor (a fused QKV projection's output).
  Tensor kv = random_bytes({nnz, 2, 8, 128}, DType::kBF16, rng);
  check_append(c, table, tokens, kv.view().select(1, 0), kv.view().select(1, 1));
}

TEST(AppendPagedKVCache, SharedPrefixPage) {
  // Requests 0 and 1 share page 3 as their first (full) page and append past it.
  Rng rng(5);
  const std::int64_t page_size = 4;
  HostPageTable table;
  table.page_size = page_size;
  table.num_pages = 6;
  table.kv_lens = {7, 6};
  table.indptr = int32_tensor({0, 2, 4});
  table.indices = int32_tensor({3, 0, 3, 5});
  table.last_page_len = int32_tensor({3, 2});
  const TestCache c = make_cache(false, KVLayout::kNHD, true, DType::kF16, 6, page_size, 2, 8, rng);
  const Tokens tokens{{0, 1, 0, 1}, {5, 5, 6, 4}};
  const Padded key = make_input(4, 2, 8, DType::kF16, true, rng);
  const Padded value = make_input(4, 2, 8, DType::kF16, false, rng);
  check_append(c, table, tokens, key.view, value.view);
}

TEST(AppendPagedKVCache, EmptyAppendsDoNothing) {
  Rng rng(3);
  // nnz == 0 over a non-empty table.
  const std::vector<std::int32_t> kv_lens{5, 0, 9};
  const HostPageTable table = random_page_table(kv_lens, 5, 0, rng);
  const TestCache c = make_cache(true, KVLayout::kNHD, false, DType::kF16, table.num_pages, 5, 2, 8, rng);
  check_append(c, table, Tokens{}, Tensor::empty({0, 2, 8}, DType::kF16),
               Tensor::empty({0, 2, 8}, DType::kF16));
  // batch_size == 0.
  const HostPageTable none = random_page_table(std::vector<std::int32_t>{}, 5, 2, rng);
  const TestCache c0 = make_cache(false, KVLayout::kHND, false, DType::kBF16, 2, 5, 2, 8, rng);
  check_append(c0, none, Tokens{}, Tensor::empty({0, 2, 8}, DType::kBF16),
               Tensor::empty({0, 2, 8}, DType::kBF16));
}

// A valid append to break one argument at a time.
struct AppendSetup {
  Tensor cache5 = Tensor::zeros({4, 2, 4, 2, 8}, DType::kF16);
  PagedKVCache cache = PagedKVCache::combined(cache5, KVLayout::kNHD);
  // Request 0: pages {2, 0}, kv_len 6; request 1: page {3}, kv_len 4; request 2 empty.
  Tensor indptr = int32_tensor({0, 2, 3, 3});
  Tensor indices = int32_tensor({2, 0, 3});
  Tensor last = int32_tensor({2, 4, 0});
  Tensor key = Tensor::zeros({3, 2, 8}, DType::kF16);
  Tensor value = Tensor::zeros({3, 2, 8}, DType::kF16);
  Tensor batch = int32_tensor({0, 0, 1});
  Tensor pos = int32_tensor({4, 5, 3});

  PageTable table() const { return {indptr, indices, last}; }
  void run() const { append_paged_kv_cache(key, value, batch, pos, cache, table()); }
};

TEST(AppendPagedKVCache, BaselineIsValid) {
  AppendSetup().run();
}

using Broken = BrokenInput<AppendSetup>;

TEST(AppendPagedKVCache, IndexArrayErrors) {
  expect_errors<AppendSetup>({
      Broken{[](AppendSetup& s) { s.batch = Tensor::zeros({3}, DType::kI64); }, "batch_indices.dtype", "int32"},
      Broken{[](AppendSetup& s) { s.pos = Tensor::zeros({3}, DType::kI64); }, "positions.dtype", "int32"},
      Broken{[](AppendSetup& s) { s.indptr = Tensor::zeros({4}, DType::kI64); }, "kv_indptr.dtype", "int32"},
      Broken{[](AppendSetup& s) { s.indices = Tensor::zeros({3}, DType::kI64); }, "kv_indices.dtype", "int32"},
      Broken{[](AppendSetup& s) { s.last = Tensor::zeros({3}, DType::kI64); }, "kv_last_page_len.dtype", "int32"},
      Broken{[](AppendSetup& s) { s.indptr = int32_tensor({1, 2, 3, 3}); }, "kv_indptr[0]"},
      Broken{[](AppendSetup& s) { s.indptr = int32_tensor({0, 2, 1, 3}); }, "kv_indptr[2]"},
      Broken{[](AppendSetup& s) { s.last = int32_tensor({2, 4}); }, "kv_last_page_len.shape[0]"},
      Broken{[](AppendSetup& s) { s.indices = int32_tensor({2, 0}); }, "kv_indices.shape[0]"},
      Broken{[](AppendSetup& s) { s.indices = int32_tensor({2, 4, 3}); }, "kv_indices[1]"},
      Broken{[](AppendSetup& s) { s.last = int32_tensor({0, 4, 0}); }, "kv_last_page_len[0]"},
      Broken{[](AppendSetup& s) { s.last = int32_tensor({2, 5, 0}); }, "kv_last_page_len[1]"},
      Broken{[](AppendSetup& s) { s.last = int32_tensor({2, 4, 1}); }, "kv_last_page_len[2]"},
  });
}

TEST(AppendPagedKVCache, TokenErrors) {
  expect_errors<AppendSetup>({
      Broken{[](AppendSetup& s) { s.batch = int32_tensor({0, 0}); }, "batch_indices.shape[0]"},
      Broken{[](AppendSetup& s) { s.pos = int32_tensor({4, 5, 3, 0}); }, "positions.shape[0]"},
      Broken{[](AppendSetup& s) { s.value = Tensor::zeros({2, 2, 8}, DType::kF16); }, "append_value.shape[0]"},
      // request 0 holds 6 tokens
      Broken{[](AppendSetup& s) { s.pos = int32_tensor({4, 6, 3}); }, "positions[1]", "kv_len"},
      Broken{[](AppendSetup& s) { s.pos = int32_tensor({4, 5, -1}); }, "positions[2]"},
      // request 2 is empty: no position is valid
      Broken{[](AppendSetup& s) {
               s.batch = int32_tensor({0, 0, 2});
               s.pos = int32_tensor({4, 5, 0});
             },
             "positions[2]"},
      Broken{[](AppendSetup& s) { s.batch = int32_tensor({0, 3, 1}); }, "batch_indices[1]"},
      Broken{[](AppendSetup& s) { s.batch = int32_tensor({-1, 0, 1}); }, "batch_indices[0]"},
  });
}

TEST(AppendPagedKVCache, DataErrors) {
  expect_errors<AppendSetup>({
      Broken{[](AppendSetup& s) { s.key = Tensor::zeros({3, 3, 8}, DType::kF16); }, "append_key.shape[1]",
             "num_kv_heads"},
      Broken{[](AppendSetup& s) { s.value = Tensor::zeros({3, 2, 16}, DType::kF16); }, "append_value.shape[2]",
             "head_dim"},
      Broken{[](AppendSetup& s) { s.key = Tensor::zeros({3, 16}, DType::kF16); }, "append_key.shape"},
      Broken{[](AppendSetup& s) { s.key = Tensor::zeros({3, 2, 8}, DType::kBF16); }, "append_key.dtype"},
  });
  {
    AppendSetup s;  // every other element of a wider tensor
    Tensor wide = Tensor::zeros({3, 2, 16}, DType::kF16);
    const std::int64_t shape[] = {3, 2, 8}, strides[] = {32, 16, 2};
    const TensorView strided(wide.data(), DType::kF16, shape, strides);
    expect_error([&] { append_paged_kv_cache(strided, s.value, s.batch, s.pos, s.cache, s.table()); },
                 "append_key.stride(-1)");
  }
  {
    AppendSetup s;
    const TensorView gpu_key(s.key.data(), DType::kF16, {3, 2, 8}, Device::cuda(0));
    expect_error([&] { append_paged_kv_cache(gpu_key, s.value, s.batch, s.pos, s.cache, s.table()); },
                 "append_key.device");
    const TensorView gpu_indptr(s.indptr.data(), DType::kI32, {4}, Device::cuda(0));
    expect_error(
        [&] {
          append_paged_kv_cache(s.key, s.value, s.batch, s.pos, s.cache, {gpu_indptr, s.indices, s.last});
        },
        "kv_indptr.device");
    const TensorView gpu_pos(s.pos.data(), DType::kI32, {3}, Device::cuda(0));
    expect_error([&] { append_paged_kv_cache(s.key, s.value, s.batch, gpu_pos, s.cache, s.table()); },
                 "positions.device");
  }
  {
    AppendSetup s;  // the cache: int dtype, and dim 1 of a 5-D tensor
    Tensor ints = Tensor::zeros({4, 4, 2, 8}, DType::kI32);
    expect_error(
        [&] {
          append_paged_kv_cache(s.key, s.value, s.batch, s.pos, PagedKVCache::pair(ints, ints), s.table());
        },
        "kv_cache.k.dtype");
    Tensor three = Tensor::zeros({4, 3, 4, 2, 8}, DType::kF16);
    expect_error([&] { PagedKVCache::combined(three); }, "kv_cache.shape[1]");
  }
}

TEST(AppendPagedKVCache, CudaTensorsWithoutCudaBackend) {
  if (cuda_backend_built()) GTEST_SKIP() << "the CUDA backend is built";
  AppendSetup s;
  const Device gpu = Device::cuda(0);
  const TensorView cache(s.cache5.data(), DType::kF16, {4, 2, 4, 2, 8}, gpu);
  const TensorView key(s.key.data(), DType::kF16, {3, 2, 8}, gpu),
      value(s.value.data(), DType::kF16, {3, 2, 8}, gpu);
  const TensorView batch(s.batch.data(), DType::kI32, {3}, gpu), pos(s.pos.data(), DType::kI32, {3}, gpu);
  const PageTable table{TensorView(s.indptr.data(), DType::kI32, {4}, gpu),
                        TensorView(s.indices.data(), DType::kI32, {3}, gpu),
                        TensorView(s.last.data(), DType::kI32, {3}, gpu)};
  expect_error([&] { append_paged_kv_cache(key, value, batch, pos, PagedKVCache::combined(cache), table); },
               "kv_cache.k.device", "CUDA backend is not built");
}

}  // namespace
}  // namespace kvinfer::testing
