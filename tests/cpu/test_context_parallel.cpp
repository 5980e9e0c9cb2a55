// SPDX-License-Identifier: Apache-2.0
// Context parallelism on the CPU: a paged decode's cache split across simulated ranks
// (shard_page_table, contiguous and striped), each rank's decode with LSE, the ranks'
// states merged by merge_states, against attention over the whole cache in float64.
// With empty shards (more ranks than a request's pages, an empty request), a request's
// partial last page on whichever rank holds it, and one rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kHq = 8, kHk = 2, kD = 64, kPage = 16;

// The float64 reference of request b, head h: softmax(q k^T * scale) v over its keys,
// read from the combined NHD cache [pages, 2, page, Hk, D] in page-table order.
std::vector<double> reference(const Tensor& q, const Tensor& cache, const std::vector<std::int32_t>& indptr,
                              const std::vector<std::int32_t>& indices, std::int32_t kv_len, std::int64_t b,
                              std::int64_t h) {
  const auto* qp = q.data_as<const std::uint16_t>() + (b * kHq + h) * kD;
  const auto* cp = cache.data_as<const std::uint16_t>();
  const std::int64_t kvh = h / (kHq / kHk);
  const auto row = [&](int kv, std::int32_t key) {  // kv 0: K, 1: V
    const std::int64_t page = indices[std::size_t(indptr[std::size_t(b)] + key / kPage)];
    return cp + (((page * 2 + kv) * kPage + key % kPage) * kHk + kvh) * kD;
  };
  std::vector<double> logit(static_cast<std::size_t>(kv_len)), o(kD, 0.0);
  double mx = -INFINITY;
  for (std::int32_t j = 0; j < kv_len; ++j) {
    double s = 0;
    for (std::int64_t d = 0; d < kD; ++d) s += double(bf16_to_f32(qp[d])) * double(bf16_to_f32(row(0, j)[d]));
    logit[std::size_t(j)] = s / std::sqrt(double(kD));
    mx = std::max(mx, logit[std::size_t(j)]);
  }
  double sum = 0;
  for (std::int32_t j = 0; j < kv_len; ++j) {
    const double w = std::exp(logit[std::size_t(j)] - mx);
    sum += w;
    for (std::int64_t d = 0; d < kD; ++d) o[std::size_t(d)] += w * double(bf16_to_f32(row(1, j)[d]));
  }
  for (double& x : o) x = kv_len > 0 ? x / sum : 0.0;
  return o;
}

TEST(ContextParallel, ShardedDecodeMergedEqualsTheWholeCache) {
  Rng rng(11);
  // kv_len 0 (empty), 1, 16 (one whole page), 17, 300 (19 pages, the last of 12 tokens), 40.
  const std::vector<std::int32_t> kv_lens{0, 1, 16, 17, 300, 40};
  std::vector<std::int32_t> indptr{0}, last;
  for (const std::int32_t len : kv_lens) {
    const std::int32_t pages = (len + std::int32_t(kPage) - 1) / std::int32_t(kPage);
    indptr.push_back(indptr.back() + pages);
    last.push_back(len == 0 ? 0 : len - (pages - 1) * std::int32_t(kPage));
  }
  std::vector<std::int32_t> indices(std::size_t(indptr.back()));
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = std::int32_t((i * 7 + 3) % indices.size());
  const auto batch = std::int64_t(kv_lens.size());
  const Tensor q = random_bf16({batch, kHq, kD}, rng);
  const Tensor cache = random_bf16({indptr.back(), 2, kPage, kHk, kD}, rng);
  const Tensor indptr_t = int32_tensor(indptr), indices_t = int32_tensor(indices), last_t = int32_tensor(last);
  const PageTable whole{.indptr = indptr_t, .indices = indices_t, .last_page_len = last_t};

  for (const ShardPolicy policy : {ShardPolicy::kContiguous, ShardPolicy::kStriped}) {
    for (const int world : {1, 2, 3, 8, 25}) {
      SCOPED_TRACE(::testing::Message() << (policy == ShardPolicy::kStriped ? "striped" : "contiguous") << ", "
                                        << world << " ranks");
      Tensor v = Tensor::empty({batch, world, kHq, kD}, DType::kF32), s = Tensor::empty({batch, world, kHq}, DType::kF32);
      std::vector<std::int32_t> keys(std::size_t(batch), 0);
      for (int rank = 0; rank < world; ++rank) {
        const PageTableShard mine = shard_page_table(whole, kPage, rank, world, policy);
        const std::vector<std::int32_t> lens = mine.kv_lens(kPage);
        for (std::int64_t b = 0; b < batch; ++b) keys[std::size_t(b)] += lens[std::size_t(b)];
        BatchDecodeWithPagedKVCache w;
        w.plan({.page_table = mine.table(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD,
                .page_size = kPage, .o_dtype = DType::kBF16});
        Tensor out = Tensor::empty({batch, kHq, kD}, DType::kBF16), lse = Tensor::empty({batch, kHq}, DType::kF32);
        w.run(q, PagedKVCache::combined(cache), out, {.lse = lse});
        for (std::int64_t b = 0; b < batch; ++b) {
          for (std::int64_t h = 0; h < kHq; ++h) {
            s.data_as<float>()[(b * world + rank) * kHq + h] = lse.data_as<const float>()[b * kHq + h];
            for (std::int64_t d = 0; d < kD; ++d) {
              v.data_as<float>()[((b * world + rank) * kHq + h) * kD + d] =
                  bf16_to_f32(out.data_as<const std::uint16_t>()[(b * kHq + h) * kD + d]);
            }
          }
        }
      }
      EXPECT_EQ(keys, kv_lens) << "every key is on exactly one rank";
      Tensor merged = Tensor::empty({batch, kHq, kD}, DType::kF32), merged_lse = Tensor::empty({batch, kHq}, DType::kF32);
      merge_states(v, s, merged, merged_lse);
      for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t h = 0; h < kHq; ++h) {
          const std::vector<double> want = reference(q, cache, indptr, indices, kv_lens[std::size_t(b)], b, h);
          if (kv_lens[std::size_t(b)] == 0) EXPECT_EQ(merged_lse.data_as<const float>()[b * kHq + h], -INFINITY);
          for (std::int64_t d = 0; d < kD; ++d) {
            // Each rank's o is rounded to bf16 before the merge: within bf16's step of 2^-8.
            ASSERT_NEAR(merged.data_as<const float>()[(b * kHq + h) * kD + d], want[std::size_t(d)],
                        8e-3 * (1.0 + std::abs(want[std::size_t(d)])))
                << "request " << b << " head " << h << " dim " << d;
          }
        }
      }
    }
  }
}

TEST(ContextParallel, ShardsKeepEveryPageOnceAndTheLastPageLength) {
  const Tensor indptr = int32_tensor({0, 5, 5, 6}), indices = int32_tensor({9, 8, 7, 6, 5, 4}),
               last = int32_tensor({3, 0, 16});
  const PageTable t{.indptr = indptr, .indices = indices, .last_page_len = last};
  const PageTableShard c0 = shard_page_table(t, 16, 0, 2, ShardPolicy::kContiguous),
                       c1 = shard_page_table(t, 16, 1, 2, ShardPolicy::kContiguous);
  EXPECT_EQ(c0.indptr, (std::vector<std::int32_t>{0, 2, 2, 2}));
  EXPECT_EQ(c0.indices, (std::vector<std::int32_t>{9, 8}));
  EXPECT_EQ(c0.last_page_len, (std::vector<std::int32_t>{16, 0, 0}));
  EXPECT_EQ(c1.indptr, (std::vector<std::int32_t>{0, 3, 3, 4}));
  EXPECT_EQ(c1.indices, (std::vector<std::int32_t>{7, 6, 5, 4}));
  EXPECT_EQ(c1.last_page_len, (std::vector<std::int32_t>{3, 0, 16}));
  const PageTableShard s0 = shard_page_table(t, 16, 0, 2, ShardPolicy::kStriped),
                       s1 = shard_page_table(t, 16, 1, 2, ShardPolicy::kStriped);
  EXPECT_EQ(s0.indices, (std::vector<std::int32_t>{9, 7, 5, 4}));
  EXPECT_EQ(s0.last_page_len, (std::vector<std::int32_t>{3, 0, 16}));  // holds page 4 of request 0: its last
  EXPECT_EQ(s1.indices, (std::vector<std::int32_t>{8, 6}));
  EXPECT_EQ(s1.last_page_len, (std::vector<std::int32_t>{16, 0, 0}));
  EXPECT_EQ(s0.kv_lens(16), (std::vector<std::int32_t>{35, 0, 16}));
  EXPECT_EQ(s1.kv_lens(16), (std::vector<std::int32_t>{32, 0, 0}));
}

TEST(ContextParallel, BadShardArgumentsAreNamedErrors) {
  const Tensor indptr = int32_tensor({0, 1}), indices = int32_tensor({0}), last = int32_tensor({4});
  const PageTable t{.indptr = indptr, .indices = indices, .last_page_len = last};
  expect_error([&] { shard_page_table(t, 16, 0, 0, ShardPolicy::kContiguous); }, "world");
  expect_error([&] { shard_page_table(t, 16, 2, 2, ShardPolicy::kContiguous); }, "rank");
  expect_error([&] { shard_page_table(t, 16, -1, 2, ShardPolicy::kStriped); }, "rank");
  expect_error([&] { shard_page_table(t, 16, 0, 2, ShardPolicy(7)); }, "policy");
  expect_error([&] { shard_page_table(t, 0, 0, 2, ShardPolicy::kStriped); }, "page_size");
  const Tensor too_long = int32_tensor({17});
  expect_error([&] { shard_page_table({.indptr = indptr, .indices = indices, .last_page_len = too_long}, 16, 0, 1,
                                      ShardPolicy::kStriped); },
               "kv_last_page_len[0]");
}

}  // namespace
}  // namespace kvinfer::testing
