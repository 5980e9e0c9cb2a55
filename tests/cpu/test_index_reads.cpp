// SPDX-License-Identifier: Apache-2.0
// Nothing is read outside the arrays a caller passes: kv_indices end at an
// inaccessible page (testing/guarded.hpp), so a read past a request's last page id
// faults in any build. Covers a request with no pages (it must not read kv_indices
// at all), the prefetch of the next key block (never past the last page), split
// chunks, every paged wrapper and MLA; and a cache whose v has fewer pages than k.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#include "testing/expect_error.hpp"
#include "testing/guarded.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kHq = 4, kHk = 2, kD = 64, kPage = 16;

// Request 0: `len` tokens in pages {page ids}; request 1: no pages, last in the
// batch, so that its kv_begin is kv_indices' length.
struct Table {
  std::vector<std::int32_t> indptr, last;
  Tensor indptr_t, last_t;
  GuardedInts indices;
  Table(std::vector<std::int32_t> pages, std::int32_t len)
      : indptr{0, std::int32_t(pages.size()), std::int32_t(pages.size())},
        last{std::int32_t(len - (std::int32_t(pages.size()) - 1) * kPage), 0},
        indptr_t(int32_tensor(indptr)),
        last_t(int32_tensor(last)),
        indices(pages) {}
  PageTable view() const { return {indptr_t, indices.view, last_t}; }
};

// The keys and values of request 0 (len tokens) as contiguous NHD tensors, from the cache.
struct Contiguous {
  Tensor k, v;
};
Contiguous gather(const Tensor& cache, const std::vector<std::int32_t>& pages, std::int32_t len) {
  Contiguous c{Tensor::empty({len, kHk, kD}, DType::kBF16), Tensor::empty({len, kHk, kD}, DType::kBF16)};
  for (std::int32_t j = 0; j < len; ++j) {
    const std::int64_t page = pages[std::size_t(j / kPage)], slot = j % kPage;
    copy(c.k.view().select(0, j), cache.view().select(0, page).select(0, 0).select(0, slot));
    copy(c.v.view().select(0, j), cache.view().select(0, page).select(0, 1).select(0, slot));
  }
  return c;
}

void expect_close(const TensorView& a, const TensorView& b) {
  ASSERT_EQ(a.numel(), b.numel());
  const auto* x = a.data_as<const std::uint16_t>();
  const auto* y = b.data_as<const std::uint16_t>();
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_NEAR(bf16_to_f32(x[i]), bf16_to_f32(y[i]), 1e-2) << "element " << i;
  }
}

void expect_empty_rows(const Tensor& out, const Tensor& lse, std::int64_t row) {
  const auto* o = out.view().select(0, row).data_as<const std::uint16_t>();
  for (std::int64_t i = 0; i < kHq * kD; ++i) ASSERT_EQ(o[i], 0) << "element " << i;
  for (std::int64_t h = 0; h < kHq; ++h) {
    EXPECT_EQ(lse.data_as<const float>()[row * kHq + h], -std::numeric_limits<float>::infinity());
  }
}

struct Case {
  std::int32_t len;
  std::vector<std::int32_t> pages;
  SplitOptions split;
};

std::vector<Case> cases() {
  return {
      {3, {2}, {}},                                   // one 3-token page: the prefetch once read entry 2
      {16, {1}, {}},                                  // a full page
      {40, {3, 0, 2}, {.fixed_split_size = 16}},      // split chunks of one page each
      {70, {4, 1, 3, 0, 2}, {.fixed_split_size = 32}},  // chunks ending inside a page's block
  };
}

TEST(IndexReads, DecodeReadsOnlyItsPages) {
  Rng rng(1);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.len);
    Tensor cache = random_bf16({5, 2, kPage, kHk, kD}, rng);
    const Table t(c.pages, c.len);
    Tensor q = random_bf16({2, kHq, kD}, rng), out = Tensor::empty({2, kHq, kD}, DType::kBF16);
    Tensor lse = Tensor::empty({2, kHq}, DType::kF32);
    BatchDecodeWithPagedKVCache w;
    w.plan({.page_table = t.view(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage,
            .split = c.split});
    w.run(q, PagedKVCache::combined(cache), out, {.lse = lse});
    expect_empty_rows(out, lse, 1);
    const Contiguous kv = gather(cache, c.pages, c.len);
    Tensor ref = Tensor::empty({kHq, kD}, DType::kBF16);
    single_decode(q.view().select(0, 0), kv.k, kv.v, ref);
    expect_close(out.view().select(0, 0), ref);
  }
}

TEST(IndexReads, PagedPrefillReadsOnlyItsPages) {
  Rng rng(2);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.len);
    for (const MaskMode mode : {MaskMode::kNone, MaskMode::kCausal}) {
      Tensor cache = random_bf16({5, 2, kPage, kHk, kD}, rng);
      const Table t(c.pages, c.len);
      const std::int32_t qo = std::min(c.len, 5);
      Tensor qo_indptr = int32_tensor(std::vector<std::int32_t>{0, qo, qo + 2});
      Tensor q = random_bf16({qo + 2, kHq, kD}, rng), out = Tensor::empty({qo + 2, kHq, kD}, DType::kBF16);
      Tensor lse = Tensor::empty({qo + 2, kHq}, DType::kF32);
      BatchPrefillWithPagedKVCache w;
      w.plan({.qo_indptr = qo_indptr, .page_table = t.view(), .num_qo_heads = kHq, .num_kv_heads = kHk,
              .head_dim = kD, .page_size = kPage, .options = {.mask_mode = mode}, .split = c.split});
      w.run(q, PagedKVCache::combined(cache), out, {.lse = lse});
      expect_empty_rows(out, lse, qo);
      expect_empty_rows(out, lse, qo + 1);
      const Contiguous kv = gather(cache, c.pages, c.len);
      Tensor ref = Tensor::empty({qo, kHq, kD}, DType::kBF16);
      single_prefill(q.view().slice(0, 0, qo), kv.k, kv.v, ref, {.options = {.mask_mode = mode}});
      expect_close(out.view().slice(0, 0, qo), ref);
    }
  }
}

TEST(IndexReads, CascadeLevelsReadOnlyTheirPages) {
  Rng rng(3);
  // Level 0: one shared 3-token page for both requests; level 1: request 0 has 3
  // tokens, request 1 none, with a one-entry kv_indices.
  Tensor cache = random_bf16({4, 2, kPage, kHk, kD}, rng);
  const GuardedInts shared_pages(std::vector<std::int32_t>{1});
  Tensor shared_indptr = int32_tensor(std::vector<std::int32_t>{0, 1}),
         shared_last = int32_tensor(std::vector<std::int32_t>{3});
  const Table own({3}, 3);
  Tensor qo0 = int32_tensor(std::vector<std::int32_t>{0, 2}), qo1 = int32_tensor(std::vector<std::int32_t>{0, 1, 2});
  Tensor q = random_bf16({2, kHq, kD}, rng), out = Tensor::empty({2, kHq, kD}, DType::kBF16);
  MultiLevelCascadeAttention w(2);
  w.plan({.levels = {{.qo_indptr = qo0, .page_table = {shared_indptr, shared_pages.view, shared_last}},
                     {.qo_indptr = qo1, .page_table = own.view()}},
          .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage});
  w.run(q, PagedKVCache::combined(cache), out);
  // Request 1 sees the shared page only.
  const Contiguous kv = gather(cache, {1}, 3);
  Tensor ref = Tensor::empty({kHq, kD}, DType::kBF16);
  single_decode(q.view().select(0, 1), kv.k, kv.v, ref);
  expect_close(out.view().select(0, 1), ref);
}

TEST(IndexReads, MLAReadsOnlyItsPages) {
  Rng rng(4);
  constexpr std::int64_t kHeads = 16;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.len);
    Tensor cache = random_bf16({5, kPage, kMlaHeadDimCkv + kMlaHeadDimKpe}, rng);
    const GuardedInts indices(c.pages);
    const std::int32_t np = std::int32_t(c.pages.size());
    Tensor qo_indptr = int32_tensor(std::vector<std::int32_t>{0, 1, 2});
    Tensor kv_indptr = int32_tensor(std::vector<std::int32_t>{0, np, np});
    Tensor kv_len = int32_tensor(std::vector<std::int32_t>{c.len, 0});
    Tensor q_nope = random_bf16({2, kHeads, kMlaHeadDimCkv}, rng), q_pe = random_bf16({2, kHeads, kMlaHeadDimKpe}, rng);
    Tensor out = Tensor::empty({2, kHeads, kMlaHeadDimCkv}, DType::kBF16);
    Tensor lse = Tensor::empty({2, kHeads}, DType::kF32);
    BatchMLAPagedAttention w;
    w.plan({.qo_indptr = qo_indptr, .kv_indptr = kv_indptr, .kv_indices = indices.view, .kv_len = kv_len,
            .num_heads = kHeads, .page_size = kPage, .sm_scale = 0.07f, .split = c.split});
    w.run(q_nope, q_pe, MLACache::combined(cache), out, {.lse = lse});
    const auto* o = out.view().select(0, 1).data_as<const std::uint16_t>();
    for (std::int64_t i = 0; i < kHeads * kMlaHeadDimCkv; ++i) ASSERT_EQ(o[i], 0) << i;
    EXPECT_EQ(lse.data_as<const float>()[kHeads], -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isfinite(lse.data_as<const float>()[0]));
  }
}

// A K/V pair whose v has fewer pages than k: page ids are checked against both.
TEST(IndexReads, PageIdsAreCheckedAgainstVToo) {
  Rng rng(5);
  Tensor k = random_bf16({4, kPage, kHk, kD}, rng), v = random_bf16({2, kPage, kHk, kD}, rng);
  const PagedKVCache cache{k, v, KVLayout::kNHD};
  const Table t({3}, 5);  // page 3: in k, not in v
  Tensor q = random_bf16({2, kHq, kD}, rng), out = Tensor::empty({2, kHq, kD}, DType::kBF16);
  BatchDecodeWithPagedKVCache decode;
  decode.plan({.page_table = t.view(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage});
  expect_error([&] { decode.run(q, cache, out); }, "kv_indices[0]", "paged_kv_cache.v");
  Tensor qo_indptr = int32_tensor(std::vector<std::int32_t>{0, 1, 2});
  BatchPrefillWithPagedKVCache prefill;
  prefill.plan({.qo_indptr = qo_indptr, .page_table = t.view(), .num_qo_heads = kHq, .num_kv_heads = kHk,
                .head_dim = kD, .page_size = kPage});
  expect_error([&] { prefill.run(q, cache, out); }, "kv_indices[0]", "paged_kv_cache.v");
  // Page 1 is in both: accepted.
  const Table ok({1}, 5);
  decode.plan({.page_table = ok.view(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage});
  decode.run(q, cache, out);
}

}  // namespace
}  // namespace kvinfer::testing
