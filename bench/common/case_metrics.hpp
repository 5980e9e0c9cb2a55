// SPDX-License-Identifier: Apache-2.0
// The work of a test case, for the benchmarks that time it: the case structs of the
// correctness tests (tests/testing: AttentionCase, MLACase) describe the benchmarks'
// shapes too, as ggml's test-backend-ops has one description drive correctness and
// performance, and these formulas turn a description into FLOPs and bytes.
//
// FLOPs count the visible query-key pairs (a causal mask's triangle, aligned
// bottom-right) times 2 x (head_dim_qk + head_dim_vo) per query head: QK^T and PV,
// a multiply-add being two. Bytes count what a kernel must move at least: each
// request's K and V (or latent cache) once, the queries read and the outputs written.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "testing/attention_case.hpp"
#include "testing/mla_case.hpp"

namespace kvinfer::bench {

// Pairs (query, key) a query segment of `qo` rows over `kv` keys attends; causal:
// query i (of qo, the last rows of kv) sees the keys up to its own position.
inline double visible_pairs(std::int64_t qo, std::int64_t kv, bool causal) {
  const double q = double(qo), k = double(kv);
  if (!causal) return q * k;
  return q * (k - q) + q * (q + 1) / 2;
}

inline double visible_pairs(const testing::AttentionCase& c) {
  if (c.options.mask_mode == MaskMode::kCustom || c.options.window_left >= 0) {
    throw std::invalid_argument("visible_pairs: a custom mask or a window has no closed form here");
  }
  const bool causal = c.options.mask_mode == MaskMode::kCausal;
  double pairs = 0;
  for (std::size_t r = 0; r < c.kv_lens.size(); ++r) {
    const std::int64_t qo = c.wrapper == testing::Wrapper::kDecode ? 1 : c.qo_lens[r];
    pairs += visible_pairs(qo, c.kv_lens[r], causal);
  }
  return pairs;
}

inline double attention_flops(const testing::AttentionCase& c) {
  return 2.0 * visible_pairs(c) * double(c.num_qo_heads) * double(c.head_dim_qk + c.head_dim_vo);
}

inline std::int64_t total_kv_len(const testing::AttentionCase& c) {
  std::int64_t n = 0;
  for (const std::int32_t len : c.kv_lens) n += len;
  return n;
}

inline std::int64_t total_qo_len(const testing::AttentionCase& c) {
  if (c.wrapper == testing::Wrapper::kDecode) return std::int64_t(c.kv_lens.size());
  std::int64_t n = 0;
  for (const std::int32_t len : c.qo_lens) n += len;
  return n;
}

// K and V of every request, once.
inline double attention_kv_bytes(const testing::AttentionCase& c) {
  return double(total_kv_len(c)) * double(c.num_kv_heads) * double(c.head_dim_qk + c.head_dim_vo) *
         double(dtype_size(c.kv_dtype));
}

// Queries read and outputs written.
inline double attention_qo_bytes(const testing::AttentionCase& c) {
  return double(total_qo_len(c)) * double(c.num_qo_heads) *
         (double(c.head_dim_qk) * double(dtype_size(c.q_dtype)) +
          double(c.head_dim_vo) * double(dtype_size(c.o_dtype)));
}

// MLA: the latent cache (ckv, head_dim_ckv wide) is both key and value; the rope
// part (kpe) joins the keys: QK^T over ckv + kpe, PV over ckv.
inline double mla_flops(const testing::MLACase& c) {
  double pairs = 0;
  for (std::size_t r = 0; r < c.kv_lens.size(); ++r)
    pairs += visible_pairs(c.qo_lens[r], c.kv_lens[r], c.causal);
  return 2.0 * pairs * double(c.num_heads) * double(2 * kMlaHeadDimCkv + c.head_dim_kpe);
}

inline double mla_kv_bytes(const testing::MLACase& c) {
  double tokens = 0;
  for (const std::int32_t len : c.kv_lens) tokens += len;
  return tokens * double(kMlaHeadDimCkv + c.head_dim_kpe) * double(dtype_size(c.kv_dtype));
}

inline double mla_qo_bytes(const testing::MLACase& c) {
  double rows = 0;
  for (const std::int32_t len : c.qo_lens) rows += len;
  return rows * double(c.num_heads) *
         (double(kMlaHeadDimCkv + c.head_dim_kpe) * double(dtype_size(c.q_dtype)) +
          double(kMlaHeadDimCkv) * double(dtype_size(c.o_dtype)));
}

}  // namespace kvinfer::bench
