// SPDX-License-Identifier: Apache-2.0
// append_paged_mla_kv_cache on the CPU: written slots equal their sources, nothing
// else of the cache changes (combined and pair forms, kpe absent); input rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kvinfer/core/error.hpp"
#include "kvinfer/ops/page.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"
#include "testing/storage_copy.hpp"

namespace kvinfer::testing {
namespace {

struct Case {
  bool combined;
  DType dtype;
  std::int64_t page_size, head_dim_ckv, head_dim_kpe;
};

void run_case(const Case& cs, std::uint64_t seed) {
  Rng rng(seed);
  const std::vector<std::int32_t> kv_lens{3 * std::int32_t(cs.page_size) + 1, 0, 2,
                                          std::int32_t(cs.page_size)};
  const std::vector<std::int32_t> append_lens{std::int32_t(cs.page_size) + 1, 0, 2, 1};
  const HostPageTable table = random_page_table(kv_lens, cs.page_size, 2, rng);
  const std::int64_t width = cs.head_dim_ckv + cs.head_dim_kpe;

  // Storage: one [P, page, ckv + kpe] tensor, or two tensors padded differently.
  std::vector<Tensor> storage;
  MLACache cache;
  if (cs.combined) {
    storage.push_back(Tensor::empty({table.num_pages, cs.page_size, width}, cs.dtype));
    cache = MLACache::combined(storage[0], cs.head_dim_ckv);
  } else {
    Padded ckv =
        padded({table.num_pages, cs.page_size, cs.head_dim_ckv}, cs.dtype, {1, 2, 16});
    cache.ckv = ckv.view;
    storage.push_back(std::move(ckv.storage));
    if (cs.head_dim_kpe > 0) {
      Padded kpe =
          padded({table.num_pages, cs.page_size, cs.head_dim_kpe}, cs.dtype, {0, 1, 0});
      cache.kpe = kpe.view;
      storage.push_back(std::move(kpe.storage));
    }
    cache = MLACache::pair(cache.ckv, cache.kpe);
  }
  for (const Tensor& s : storage) fill_random_bytes(s, rng);

  // Tokens, shuffled; inputs are views of one [nnz, ckv + kpe + 8] tensor (strided rows).
  std::vector<std::pair<std::int32_t, std::int32_t>> tokens;
  for (std::size_t b = 0; b < kv_lens.size(); ++b) {
    for (std::int32_t p = kv_lens[b] - append_lens[b]; p < kv_lens[b]; ++p)
      tokens.emplace_back(std::int32_t(b), p);
  }
  std::shuffle(tokens.begin(), tokens.end(), rng);
  const std::int64_t nnz = std::int64_t(tokens.size());
  Tensor input = random_bytes({nnz, width + 8}, cs.dtype, rng);
  const TensorView ckv_in = input.view().slice(1, 0, cs.head_dim_ckv);
  const TensorView kpe_in =
      cs.head_dim_kpe > 0 ? input.view().slice(1, cs.head_dim_ckv, width) : TensorView();

  // Expected: the storage with each token's row written by element index.
  std::vector<Tensor> expected;
  for (const Tensor& s : storage) expected.push_back(clone(s));
  const auto moved = [&](const TensorView& v, std::size_t buffer) {
    return rebase(v, storage[buffer], expected[buffer]);
  };
  const std::size_t es = dtype_size(cs.dtype);
  const auto* indptr = table.indptr.data_as<std::int32_t>();
  const auto* indices = table.indices.data_as<std::int32_t>();
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const auto [b, p] = tokens[t];
    const std::int64_t page = indices[indptr[b] + p / cs.page_size], slot = p % cs.page_size;
    for (std::int64_t d = 0; d < width; ++d) {
      const bool is_ckv = d < cs.head_dim_ckv;
      const std::int64_t dst[] = {page, slot, is_ckv ? d : d - cs.head_dim_ckv};
      const TensorView dst_view = is_ckv ? moved(cache.ckv, 0) : moved(cache.kpe, cs.combined ? 0 : 1);
      const std::int64_t src[] = {std::int64_t(t), d};
      std::memcpy(dst_view.element_ptr(dst), input.view().element_ptr(src), es);
    }
  }

  std::vector<std::int32_t> batch, pos;
  for (auto [b, p] : tokens) batch.push_back(b), pos.push_back(p);
  append_paged_mla_kv_cache(ckv_in, kpe_in, int32_tensor(batch), int32_tensor(pos), cache, table.view());
  for (std::size_t i = 0; i < storage.size(); ++i) {
    EXPECT_TRUE(same_bytes(storage[i], expected[i])) << "storage " << i;
  }
}

TEST(AppendPagedMLAKVCache, MatchesDefinition) {
  std::uint64_t seed = 1;
  for (bool combined : {true, false}) {
    for (DType dtype : {DType::kBF16, DType::kF16, DType::kE4M3, DType::kF32}) {
      for (std::int64_t page_size : {1, 5, 16}) {
        for (auto [ckv, kpe] : {std::pair<std::int64_t, std::int64_t>{512, 64}, {32, 8}, {48, 0}}) {
          SCOPED_TRACE(::testing::Message()
                       << (combined ? "combined " : "pair ") << dtype_name(dtype) << " page_size "
                       << page_size << " ckv " << ckv << " kpe " << kpe);
          run_case({combined, dtype, page_size, ckv, kpe}, seed++);
        }
      }
    }
  }
}

struct AppendSetup {
  Tensor storage = Tensor::zeros({3, 4, 576}, DType::kBF16);
  MLACache cache = MLACache::combined(storage);
  Tensor indptr = int32_tensor({0, 2, 2});
  Tensor indices = int32_tensor({1, 2});
  Tensor last = int32_tensor({3, 0});
  Tensor ckv = Tensor::zeros({2, 512}, DType::kBF16);
  Tensor kpe = Tensor::zeros({2, 64}, DType::kBF16);
  Tensor batch = int32_tensor({0, 0});
  Tensor pos = int32_tensor({5, 6});
  void run(const TensorView& kpe_arg) const {
    append_paged_mla_kv_cache(ckv, kpe_arg, batch, pos, cache, {indptr, indices, last});
  }
  void run() const { run(kpe); }
};

using Broken = BrokenInput<AppendSetup>;

TEST(AppendPagedMLAKVCache, Errors) {
  AppendSetup().run();
  {
    AppendSetup s;
    expect_error([&] { s.run(TensorView()); }, "append_kpe");
  }
  {
    AppendSetup s;  // a cache without kpe takes no kpe data
    s.cache = MLACache::combined(s.storage, 576);
    s.ckv = Tensor::zeros({2, 576}, DType::kBF16);
    s.run(TensorView());
    expect_error([&] { s.run(); }, "append_kpe");
  }
  expect_errors<AppendSetup>({
      Broken{[](AppendSetup& s) { s.ckv = Tensor::zeros({2, 256}, DType::kBF16); }, "append_ckv.shape[1]",
             "head_dim_ckv"},
      Broken{[](AppendSetup& s) { s.kpe = Tensor::zeros({2, 32}, DType::kBF16); }, "append_kpe.shape[1]",
             "head_dim_kpe"},
      Broken{[](AppendSetup& s) { s.kpe = Tensor::zeros({3, 64}, DType::kBF16); }, "append_kpe.shape[0]"},
      Broken{[](AppendSetup& s) { s.ckv = Tensor::zeros({2, 512}, DType::kF16); }, "append_ckv.dtype"},
      Broken{[](AppendSetup& s) { s.pos = int32_tensor({5, 7}); }, "positions[1]"},
      Broken{[](AppendSetup& s) { s.batch = int32_tensor({0, 2}); }, "batch_indices[1]"},
      Broken{[](AppendSetup& s) { s.batch = Tensor::zeros({2}, DType::kI64); }, "batch_indices.dtype", "int32"},
      Broken{[](AppendSetup& s) { s.indices = int32_tensor({1, 3}); }, "kv_indices[1]"},
      Broken{[](AppendSetup& s) { s.last = int32_tensor({5, 0}); }, "kv_last_page_len[0]"},
  });
}

}  // namespace
}  // namespace kvinfer::testing
