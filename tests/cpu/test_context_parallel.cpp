// SPDX-License-Identifier: Apache-2.0
// Context parallelism on the CPU: a paged decode's cache split across simulated ranks
// (shard_page_table, contiguous and striped), each rank's decode with LSE, the ranks'
// states merged by merge_states, against attention over the whole cache in float64.
// With empty shards (more ranks than a request's pages, an empty request), a request's
// partial last page on whichever rank holds it, and one rank. Causal prefill across
// two ranks (striped chunks) with the masks the API has. Position offsets: contiguous
// shards of a decode with a window, ALiBi and RoPE, and a prompt's (query chunk, key
// chunk) blocks under causal + window + ALiBi, each against the float64 oracle over
// the whole sequence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#include "oracle/oracle.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kHq = 8, kHk = 2, kD = 64, kPage = 16;

// A host int32 tensor's values.
std::vector<std::int32_t> host_ints(const Tensor& t) {
  const auto* p = t.data_as<const std::int32_t>();
  return {p, p + t.numel()};
}

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
  const HostPageTable table = random_page_table(kv_lens, kPage, 0, rng);
  const std::vector<std::int32_t> indptr = host_ints(table.indptr), indices = host_ints(table.indices);
  const auto batch = std::int64_t(kv_lens.size());
  const Tensor q = random_bf16({batch, kHq, kD}, rng);
  const Tensor cache = random_bf16({table.num_pages, 2, kPage, kHk, kD}, rng);
  const PageTable whole = table.view();

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

// Rows [begin, end) of a [tokens, heads, D] bf16 tensor, as a tensor of their own.
Tensor rows_of(const Tensor& t, std::int64_t begin, std::int64_t end) {
  const std::int64_t row = t.size(1) * t.size(2);
  Tensor out = Tensor::empty({end - begin, t.size(1), t.size(2)}, DType::kBF16);
  std::copy_n(t.data_as<const std::uint16_t>() + begin * row, (end - begin) * row, out.data_as<std::uint16_t>());
  return out;
}

// Causal prefill of one prompt across two ranks, load-balanced as striped attention
// does: the prompt in four chunks of unequal lengths (77, 73, 81, 69), rank 0 holding
// chunks 0 and 3, rank 1 chunks 1 and 2, so that each computes five (query chunk, key
// chunk) blocks. Query chunk c sees key chunks before it whole (no mask) and its own
// under the causal mask: a chunk against itself has qo_len == kv_len, where the
// bottom-right diagonal is the prompt's. Each block's state (o, LSE) is a partial
// state of chunk c's rows, and merge_states over a row's blocks gives causal attention
// over the whole prompt, in float64 here.
TEST(ContextParallel, CausalPrefillOverTwoRanksMergedEqualsTheWholePrompt) {
  Rng rng(13);
  const std::vector<std::int64_t> bounds{0, 77, 150, 231, 300};
  const std::int64_t len = bounds.back();
  const Tensor q = random_bf16({len, kHq, kD}, rng), k = random_bf16({len, kHk, kD}, rng),
               v = random_bf16({len, kHk, kD}, rng);
  const std::vector<std::vector<int>> chunks_of_rank{{0, 3}, {1, 2}};
  Tensor merged = Tensor::empty({len, kHq, kD}, DType::kF32), merged_lse = Tensor::empty({len, kHq}, DType::kF32);
  std::vector<int> blocks(chunks_of_rank.size(), 0);
  for (std::size_t rank = 0; rank < chunks_of_rank.size(); ++rank) {
    for (const int c : chunks_of_rank[rank]) {
      const std::int64_t qo = bounds[std::size_t(c) + 1] - bounds[std::size_t(c)];
      const Tensor qc = rows_of(q, bounds[std::size_t(c)], bounds[std::size_t(c) + 1]);
      Tensor states = Tensor::empty({qo, c + 1, kHq, kD}, DType::kF32), lses = Tensor::empty({qo, c + 1, kHq}, DType::kF32);
      for (int kc = 0; kc <= c; ++kc) {  // the key chunks reach the rank in ring order
        const std::int64_t kv = bounds[std::size_t(kc) + 1] - bounds[std::size_t(kc)];
        const Tensor qo_indptr = int32_tensor({0, std::int32_t(qo)}), kv_indptr = int32_tensor({0, std::int32_t(kv)});
        BatchPrefillWithRaggedKVCache w;
        w.plan({.qo_indptr = qo_indptr, .kv_indptr = kv_indptr, .num_qo_heads = kHq, .num_kv_heads = kHk,
                .head_dim_qk = kD,
                .options = {.mask_mode = kc == c ? MaskMode::kCausal : MaskMode::kNone}});
        Tensor out = Tensor::empty({qo, kHq, kD}, DType::kBF16), lse = Tensor::empty({qo, kHq}, DType::kF32);
        w.run(qc, rows_of(k, bounds[std::size_t(kc)], bounds[std::size_t(kc) + 1]),
              rows_of(v, bounds[std::size_t(kc)], bounds[std::size_t(kc) + 1]), out, {.lse = lse});
        ++blocks[rank];
        for (std::int64_t i = 0; i < qo; ++i) {
          for (std::int64_t h = 0; h < kHq; ++h) {
            lses.data_as<float>()[(i * (c + 1) + kc) * kHq + h] = lse.data_as<const float>()[i * kHq + h];
            for (std::int64_t d = 0; d < kD; ++d) {
              states.data_as<float>()[((i * (c + 1) + kc) * kHq + h) * kD + d] =
                  bf16_to_f32(out.data_as<const std::uint16_t>()[(i * kHq + h) * kD + d]);
            }
          }
        }
      }
      Tensor o_c = Tensor::empty({qo, kHq, kD}, DType::kF32), lse_c = Tensor::empty({qo, kHq}, DType::kF32);
      merge_states(states, lses, o_c, lse_c);
      std::copy_n(o_c.data_as<const float>(), qo * kHq * kD, merged.data_as<float>() + bounds[std::size_t(c)] * kHq * kD);
      std::copy_n(lse_c.data_as<const float>(), qo * kHq, merged_lse.data_as<float>() + bounds[std::size_t(c)] * kHq);
    }
  }
  EXPECT_EQ(blocks, (std::vector<int>{5, 5})) << "the striped assignment balances the blocks";
  const auto* qp = q.data_as<const std::uint16_t>();
  const auto* kp = k.data_as<const std::uint16_t>();
  const auto* vp = v.data_as<const std::uint16_t>();
  for (std::int64_t i = 0; i < len; ++i) {
    for (std::int64_t h = 0; h < kHq; ++h) {
      const std::int64_t g = h / (kHq / kHk);
      std::vector<double> logit(std::size_t(i + 1)), want(kD, 0.0);
      double mx = -INFINITY, sum = 0;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (std::int64_t d = 0; d < kD; ++d) {
          dot += double(bf16_to_f32(qp[(i * kHq + h) * kD + d])) * double(bf16_to_f32(kp[(j * kHk + g) * kD + d]));
        }
        logit[std::size_t(j)] = dot / std::sqrt(double(kD));
        mx = std::max(mx, logit[std::size_t(j)]);
      }
      for (std::int64_t j = 0; j <= i; ++j) {
        const double w = std::exp(logit[std::size_t(j)] - mx);
        sum += w;
        for (std::int64_t d = 0; d < kD; ++d) want[std::size_t(d)] += w * double(bf16_to_f32(vp[(j * kHk + g) * kD + d]));
      }
      EXPECT_NEAR(merged_lse.data_as<const float>()[i * kHq + h], (mx + std::log(sum)) / std::log(2.0), 1e-3)
          << "row " << i << " head " << h;
      for (std::int64_t d = 0; d < kD; ++d) {
        ASSERT_NEAR(merged.data_as<const float>()[(i * kHq + h) * kD + d], want[std::size_t(d)] / sum,
                    8e-3 * (1.0 + std::abs(want[std::size_t(d)] / sum)))
            << "row " << i << " head " << h << " dim " << d;
      }
    }
  }
}

// A bf16 tensor's values as doubles (row-major).
std::vector<double> to_double(const Tensor& t) {
  std::vector<double> out(std::size_t(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(t.data_as<const std::uint16_t>()[i]);
  return out;
}

// Merged states o [rows, heads, D] / lse [rows, heads] against the oracle's rows from
// row0 on.
void expect_states_near(const float* o, const float* lse, const oracle::AttentionResult& want, std::int64_t row0,
                        std::int64_t rows) {
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t h = 0; h < kHq; ++h) {
      const double want_lse = want.lse[std::size_t((row0 + i) * kHq + h)];
      const float got_lse = lse[i * kHq + h];
      if (std::isinf(want_lse)) {
        EXPECT_EQ(got_lse, -INFINITY) << "row " << row0 + i << " head " << h;
      } else {
        EXPECT_NEAR(got_lse, want_lse, 2e-3 * (1.0 + std::abs(want_lse))) << "row " << row0 + i << " head " << h;
      }
      for (std::int64_t d = 0; d < kD; ++d) {
        const double w = want.o[std::size_t(((row0 + i) * kHq + h) * kD + d)];
        // Each block's o is rounded to bf16 before the merge: within bf16's step of 2^-8.
        ASSERT_NEAR(o[(i * kHq + h) * kD + d], w, 8e-3 * (1.0 + std::abs(w)))
            << "row " << row0 + i << " head " << h << " dim " << d;
      }
    }
  }
}

// Copies one block's (o, LSE) into slot `slot` of `slots` of the states merge_states takes.
void put_state(const Tensor& out, const Tensor& lse, Tensor& states, Tensor& lses, std::int64_t rows, int slot,
               int slots) {
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t h = 0; h < kHq; ++h) {
      lses.data_as<float>()[(i * slots + slot) * kHq + h] = lse.data_as<const float>()[i * kHq + h];
      for (std::int64_t d = 0; d < kD; ++d) {
        states.data_as<float>()[((i * slots + slot) * kHq + h) * kD + d] =
            bf16_to_f32(out.data_as<const std::uint16_t>()[(i * kHq + h) * kD + d]);
      }
    }
  }
}

// A prompt of 300 tokens in chunks of 77, 73, 81 and 69: every (query chunk c, key
// chunk kc) block runs as its own ragged prefill, causal, with a window of 100 keys and
// ALiBi, its rows placed by the position offset (start of c - start of kc) - (kv - qo),
// so that the block's mask and ALiBi distances are the prompt's. Blocks above the
// diagonal see nothing (LSE -inf, which the merge weighs as nothing), blocks far below
// it nothing under the window. The merged states equal the oracle over the whole
// prompt.
TEST(ContextParallel, PositionOffsetsPlaceEachBlockOfACausalWindowedPrompt) {
  Rng rng(17);
  const std::vector<std::int64_t> bounds{0, 77, 150, 231, 300};
  const std::int64_t len = bounds.back();
  const int chunks = int(bounds.size()) - 1;
  const Tensor q = random_bf16({len, kHq, kD}, rng), k = random_bf16({len, kHk, kD}, rng),
               v = random_bf16({len, kHk, kD}, rng);
  const AttentionOptions options{.mask_mode = MaskMode::kCausal, .window_left = 100,
                                 .pos_encoding = PosEncoding::kAlibi};
  oracle::AttentionSpec spec = oracle::spec_from_options(options, len, len, kHq, kHk, kD, kD);
  const oracle::AttentionResult want = oracle::attention(spec, to_double(q), to_double(k), to_double(v));
  int empty_blocks = 0;
  for (int c = 0; c < chunks; ++c) {
    const std::int64_t q0 = bounds[std::size_t(c)], qo = bounds[std::size_t(c) + 1] - q0;
    const Tensor qc = rows_of(q, q0, q0 + qo);
    Tensor states = Tensor::empty({qo, chunks, kHq, kD}, DType::kF32), lses = Tensor::empty({qo, chunks, kHq}, DType::kF32);
    for (int kc = 0; kc < chunks; ++kc) {
      const std::int64_t k0 = bounds[std::size_t(kc)], kv = bounds[std::size_t(kc) + 1] - k0;
      const Tensor qo_indptr = int32_tensor({0, std::int32_t(qo)}), kv_indptr = int32_tensor({0, std::int32_t(kv)});
      const Tensor offsets = int32_tensor({std::int32_t((q0 - k0) - (kv - qo))});
      BatchPrefillWithRaggedKVCache w;
      w.plan({.qo_indptr = qo_indptr, .kv_indptr = kv_indptr, .num_qo_heads = kHq, .num_kv_heads = kHk,
              .head_dim_qk = kD, .options = options, .position_offsets = offsets});
      Tensor out = Tensor::empty({qo, kHq, kD}, DType::kBF16), lse = Tensor::empty({qo, kHq}, DType::kF32);
      w.run(qc, rows_of(k, k0, k0 + kv), rows_of(v, k0, k0 + kv), out, {.lse = lse});
      if (std::all_of(lse.data_as<const float>(), lse.data_as<const float>() + qo * kHq,
                      [](float x) { return x == -INFINITY; }))
        ++empty_blocks;
      put_state(out, lse, states, lses, qo, kc, chunks);
    }
    Tensor o_c = Tensor::empty({qo, kHq, kD}, DType::kF32), lse_c = Tensor::empty({qo, kHq}, DType::kF32);
    merge_states(states, lses, o_c, lse_c);
    expect_states_near(o_c.data_as<const float>(), lse_c.data_as<const float>(), want, q0, qo);
  }
  // Above the diagonal (6 blocks) and, under the window of 100, chunk 3 against chunk 0
  // (its first row, 231, sees keys from 131 on): 7 blocks that see nothing.
  EXPECT_EQ(empty_blocks, 7);
}

// A decode's cache in contiguous shards (shard_page_table), each rank placing the
// query at its global position with the offset kv_len - (first key of the shard + the
// shard's keys), under a window of 200 keys and ALiBi, then RoPE: merged, the oracle
// over the whole cache.
TEST(ContextParallel, PositionOffsetsPlaceTheQueryOfContiguousDecodeShards) {
  Rng rng(19);
  const std::vector<std::int32_t> kv_lens{300, 17, 0, 250};
  const HostPageTable table = random_page_table(kv_lens, kPage, 0, rng);
  const std::vector<std::int32_t> indptr = host_ints(table.indptr), indices = host_ints(table.indices);
  const auto batch = std::int64_t(kv_lens.size());
  const Tensor q = random_bf16({batch, kHq, kD}, rng);
  const Tensor cache = random_bf16({table.num_pages, 2, kPage, kHk, kD}, rng);
  const PageTable whole = table.view();

  // Request b's keys and values in order, as doubles [kv_len, Hk, D].
  const auto keys_of = [&](std::int64_t b, int kv) {
    std::vector<double> out;
    const auto* cp = cache.data_as<const std::uint16_t>();
    for (std::int32_t j = 0; j < kv_lens[std::size_t(b)]; ++j) {
      const std::int64_t page = indices[std::size_t(indptr[std::size_t(b)] + j / kPage)];
      const auto* row = cp + ((page * 2 + kv) * kPage + j % kPage) * kHk * kD;
      for (std::int64_t x = 0; x < kHk * kD; ++x) out.push_back(bf16_to_f32(row[x]));
    }
    return out;
  };
  for (const PosEncoding encoding : {PosEncoding::kAlibi, PosEncoding::kRopeLlama}) {
    const AttentionOptions options{.window_left = 200, .pos_encoding = encoding};
    for (const int world : {1, 2, 3, 5}) {
      SCOPED_TRACE(::testing::Message() << world << " ranks, " << pos_encoding_name(encoding));
      Tensor states = Tensor::empty({batch, world, kHq, kD}, DType::kF32),
             lses = Tensor::empty({batch, world, kHq}, DType::kF32);
      std::vector<std::int32_t> first_key(std::size_t(batch), 0);
      for (int rank = 0; rank < world; ++rank) {
        const PageTableShard mine = shard_page_table(whole, kPage, rank, world, ShardPolicy::kContiguous);
        const std::vector<std::int32_t> lens = mine.kv_lens(kPage);
        std::vector<std::int32_t> offsets;
        for (std::size_t b = 0; b < kv_lens.size(); ++b) offsets.push_back(kv_lens[b] - (first_key[b] + lens[b]));
        const Tensor offsets_t = int32_tensor(offsets);
        BatchDecodeWithPagedKVCache w;
        w.plan({.page_table = mine.table(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD,
                .page_size = kPage, .options = options, .position_offsets = offsets_t, .o_dtype = DType::kBF16});
        Tensor out = Tensor::empty({batch, kHq, kD}, DType::kBF16), lse = Tensor::empty({batch, kHq}, DType::kF32);
        w.run(q, PagedKVCache::combined(cache), out, {.lse = lse});
        put_state(out, lse, states, lses, batch, rank, world);
        for (std::size_t b = 0; b < kv_lens.size(); ++b) first_key[b] += lens[b];
      }
      EXPECT_EQ(first_key, kv_lens) << "every key is on exactly one rank";
      Tensor merged = Tensor::empty({batch, kHq, kD}, DType::kF32), merged_lse = Tensor::empty({batch, kHq}, DType::kF32);
      merge_states(states, lses, merged, merged_lse);
      for (std::int64_t b = 0; b < batch; ++b) {
        SCOPED_TRACE(::testing::Message() << "request " << b);
        oracle::AttentionSpec spec = oracle::spec_from_options(options, 1, kv_lens[std::size_t(b)], kHq, kHk, kD, kD);
        std::vector<double> qb(std::size_t(kHq * kD));
        for (std::size_t x = 0; x < qb.size(); ++x)
          qb[x] = bf16_to_f32(q.data_as<const std::uint16_t>()[std::size_t(b * kHq * kD) + x]);
        const oracle::AttentionResult want = oracle::attention(spec, qb, keys_of(b, 0), keys_of(b, 1));
        expect_states_near(merged.data_as<const float>() + b * kHq * kD, merged_lse.data_as<const float>() + b * kHq,
                           want, 0, 1);
      }
    }
  }
}

TEST(ContextParallel, BadPositionOffsetsAreNamedErrors) {
  const Tensor qo_indptr = int32_tensor({0, 4}), kv_indptr = int32_tensor({0, 9});
  const auto plan = [&](const Tensor& offsets, int window_left) {
    BatchPrefillWithRaggedKVCache w;
    w.plan({.qo_indptr = qo_indptr, .kv_indptr = kv_indptr, .num_qo_heads = kHq, .num_kv_heads = kHk,
            .head_dim_qk = kD, .options = {.mask_mode = MaskMode::kCausal, .window_left = window_left},
            .position_offsets = offsets});
  };
  expect_error([&] { plan(int32_tensor({1, 2}), -1); }, "position_offsets.shape[0]");
  expect_error([&] { plan(Tensor::empty({1}, DType::kF32), -1); }, "position_offsets.dtype");
  expect_error([&] { plan(int32_tensor({std::numeric_limits<std::int32_t>::max()}), -1); }, "position_offsets[0]");
  expect_error([&] { plan(int32_tensor({std::numeric_limits<std::int32_t>::min()}), 5); }, "position_offsets[0]");
  plan(int32_tensor({-1000}), 7);  // every row before every key: allowed (each row sees nothing)
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
