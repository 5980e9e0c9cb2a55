// SPDX-License-Identifier: Apache-2.0
// CPU execution of a planned attention call. Each work item attends a tile of
// packed query rows (tokens x heads of one KV-head group) to a chunk of keys with
// an online base-2 softmax in float32; split requests are merged afterwards in the
// order of their chunks, so results do not depend on the thread count.
#include "cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/mask_policy.hpp"
#include "cpu/convert.hpp"
#include "cpu/thread_pool.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer::cpu {
namespace {

using detail::AttentionParams;
using detail::RequestInfo;
using detail::TileClass;
using detail::WorkItem;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::int32_t kKeyBlock = 32;  // keys converted to float once and shared by all rows

// Where key j of a request's KV head lives.
class KeyAddress {
 public:
  KeyAddress(const AttentionParams& p, const TensorView& kv, const RequestInfo& r, std::int32_t kv_head)
      : base_(static_cast<const char*>(kv.data())),
        elem_(std::int64_t(kv.element_size())),
        paged_(p.problem.storage == detail::KVStorage::kPaged),
        page_size_(p.problem.page_size) {
    if (paged_) {
      const PageStrides s = page_strides(kv, p.problem.layout);
      page_stride_ = s.page;
      token_stride_ = s.token;
      base_ += kv_head * s.head * elem_;
      pages_ = p.kv_indices.data_as<const std::int32_t>() + r.kv_begin;
    } else {
      const bool nhd = p.problem.layout == KVLayout::kNHD;
      token_stride_ = kv.stride(nhd ? 0 : 1);
      base_ += (kv_head * kv.stride(nhd ? 1 : 0) + std::int64_t(r.kv_begin) * token_stride_) * elem_;
    }
  }
  const void* operator()(std::int32_t j) const {
    if (!paged_) return base_ + j * token_stride_ * elem_;
    const std::int64_t page = pages_[j / page_size_];
    return base_ + (page * page_stride_ + (j % page_size_) * token_stride_) * elem_;
  }

 private:
  const char* base_;
  std::int64_t elem_;
  bool paged_;
  std::int64_t page_size_;
  std::int64_t page_stride_ = 0, token_stride_ = 0;
  const std::int32_t* pages_ = nullptr;
};

// Rotate-half RoPE of one row at position `pos`, in place.
void apply_rope(float* x, std::int64_t dim, std::int64_t pos, float rcp_scale, float rcp_theta) {
  const std::int64_t half = dim / 2;
  for (std::int64_t d = 0; d < half; ++d) {
    const float freq = rcp_scale * std::pow(rcp_theta, float(2 * d) / float(dim));
    const float angle = float(pos) * freq;
    const float c = std::cos(angle), s = std::sin(angle);
    const float a = x[d], b = x[d + half];
    x[d] = a * c - b * s;
    x[d + half] = b * c + a * s;
  }
}

struct RowState {
  float m = kNegInf;  // running max of base-2 scores
  float d = 0.0f;     // running sum of 2^(s - m)
};

void run_item(const AttentionParams& p, const WorkItem& item) {
  const auto& pr = p.problem;
  const RequestInfo& r = p.requests[item.request];
  const std::int64_t group = pr.group_size();
  const std::int64_t dqk = pr.head_dim_qk, dvo = pr.head_dim_vo;
  const std::int32_t nrows = item.row_end - item.row_begin;
  const bool rope = pr.pos_encoding == PosEncoding::kRopeLlama;
  const bool alibi = pr.pos_encoding == PosEncoding::kAlibi;
  const bool soft_cap = pr.logits_soft_cap > 0.0f;
  // Without ALiBi or a soft cap, sm_scale * log2(e) is folded into q once.
  const bool fold_scale = !alibi && !soft_cap;

  detail::RequestMask mask;
  mask.causal = pr.mask_mode == MaskMode::kCausal;
  mask.window_left = pr.window_left;
  mask.custom = (pr.mask_mode == MaskMode::kCustom) ? p.custom_mask + r.mask_offset : nullptr;
  mask.qo_len = r.qo_len;
  mask.kv_len = r.kv_len;

  // Query rows of the tile: token t = row / group, qo head = kv_head * group + row % group.
  std::vector<float> q(std::size_t(nrows) * dqk), acc(std::size_t(nrows) * dvo, 0.0f);
  std::vector<std::int32_t> token(nrows), head(nrows);
  std::vector<float> slope(nrows, 0.0f);
  std::vector<RowState> state(nrows);
  for (std::int32_t i = 0; i < nrows; ++i) {
    const std::int32_t row = item.row_begin + i;
    token[i] = std::int32_t(row / group);
    head[i] = std::int32_t(item.kv_head * group + row % group);
    const auto* src = static_cast<const char*>(p.q.data()) +
                      ((r.qo_begin + token[i]) * p.q.stride(0) + head[i] * p.q.stride(1)) * std::int64_t(p.q.element_size());
    float* qi = &q[std::size_t(i) * dqk];
    load_row(src, pr.q_dtype, qi, dqk);
    if (rope) apply_rope(qi, dqk, mask.diagonal(token[i]), pr.rope_rcp_scale, pr.rope_rcp_theta);
    if (fold_scale) {
      for (std::int64_t d = 0; d < dqk; ++d) qi[d] *= p.sm_scale * kLog2e;
    }
    if (alibi) slope[i] = p.alibi_slopes[head[i]];
  }

  const KeyAddress k_addr(p, p.k, r, item.kv_head), v_addr(p, p.v, r, item.kv_head);
  std::vector<float> kb(std::size_t(kKeyBlock) * dqk), vb(std::size_t(kKeyBlock) * dvo);
  std::vector<float> s(std::size_t(nrows) * kKeyBlock);
  const std::int32_t tok_first = token[0], tok_last = token[nrows - 1] + 1;

  for (std::int32_t j0 = item.kv_begin; j0 < item.kv_end; j0 += kKeyBlock) {
    const std::int32_t nk = std::min(kKeyBlock, item.kv_end - j0);
    const TileClass tile = mask.classify(tok_first, tok_last, j0, j0 + nk);
    if (tile == TileClass::kEmpty) continue;
    for (std::int32_t j = 0; j < nk; ++j) {
      float* kj = &kb[std::size_t(j) * dqk];
      load_row(k_addr(j0 + j), pr.kv_dtype, kj, dqk);
      if (rope) apply_rope(kj, dqk, j0 + j, pr.rope_rcp_scale, pr.rope_rcp_theta);
      load_row(v_addr(j0 + j), pr.kv_dtype, &vb[std::size_t(j) * dvo], dvo);
    }
    for (std::int32_t i = 0; i < nrows; ++i) {
      const float* qi = &q[std::size_t(i) * dqk];
      float* si = &s[std::size_t(i) * kKeyBlock];
      const std::int32_t i_pos = mask.diagonal(token[i]);
      float block_max = kNegInf;
      for (std::int32_t j = 0; j < nk; ++j) {
        const float* kj = &kb[std::size_t(j) * dqk];
        float dot = 0.0f;
        for (std::int64_t d = 0; d < dqk; ++d) dot += qi[d] * kj[d];
        float score = dot;
        if (!fold_scale) {
          score *= p.sm_scale;
          if (alibi) score += slope[i] * float(j0 + j - i_pos);
          if (soft_cap) score = pr.logits_soft_cap * std::tanh(score / pr.logits_soft_cap);
          score *= kLog2e;
        }
        if (tile == TileClass::kPartial && !mask.visible(token[i], j0 + j)) score = kNegInf;
        si[j] = score;
        block_max = std::max(block_max, score);
      }
      if (block_max == kNegInf) continue;  // nothing visible to this row here
      RowState& st = state[i];
      const float m_new = std::max(st.m, block_max);
      const float rescale = std::exp2(st.m - m_new);  // 0 when st.m is -inf
      float* ai = &acc[std::size_t(i) * dvo];
      if (rescale != 1.0f) {
        for (std::int64_t d = 0; d < dvo; ++d) ai[d] *= rescale;
      }
      float sum = 0.0f;
      for (std::int32_t j = 0; j < nk; ++j) {
        const float w = std::exp2(si[j] - m_new);
        if (w == 0.0f) continue;
        sum += w;
        const float* vj = &vb[std::size_t(j) * dvo];
        for (std::int64_t d = 0; d < dvo; ++d) ai[d] += w * vj[d];
      }
      st.d = st.d * rescale + sum;
      st.m = m_new;
    }
  }

  // Epilogue: the final output, or a partial state of this chunk.
  const bool split = r.num_chunks > 1;
  std::vector<float> out_row(dvo);
  for (std::int32_t i = 0; i < nrows; ++i) {
    const RowState& st = state[i];
    const float* ai = &acc[std::size_t(i) * dvo];
    const bool empty = st.d == 0.0f;
    const float norm = empty ? 0.0f : p.v_scale / st.d;
    const float lse = empty ? kNegInf : st.m + std::log2(st.d);
    if (split) {
      const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + token[i];
      float* po = p.partial_o + (prow * pr.num_qo_heads + head[i]) * dvo;
      for (std::int64_t d = 0; d < dvo; ++d) po[d] = ai[d] * norm;
      p.partial_lse[prow * pr.num_qo_heads + head[i]] = lse;
      continue;
    }
    for (std::int64_t d = 0; d < dvo; ++d) out_row[d] = ai[d] * norm;
    const std::int64_t orow = r.qo_begin + token[i];
    auto* dst = static_cast<char*>(p.o.data()) +
                (orow * p.o.stride(0) + head[i] * p.o.stride(1)) * std::int64_t(p.o.element_size());
    store_row(out_row.data(), pr.o_dtype, dst, dvo);
    if (p.lse.defined()) p.lse.data_as<float>()[orow * p.lse.stride(0) + head[i] * p.lse.stride(1)] = lse;
  }
}

// Merges the chunks of one split query row, in chunk order, for every head.
void merge_token(const AttentionParams& p, const detail::MergeToken& mt) {
  const auto& pr = p.problem;
  const RequestInfo& r = p.requests[mt.request];
  const std::int64_t t = mt.row - r.qo_begin;
  const std::int64_t dvo = pr.head_dim_vo;
  std::vector<float> out(dvo);
  for (std::int64_t h = 0; h < pr.num_qo_heads; ++h) {
    float m = kNegInf;
    for (std::int32_t c = 0; c < r.num_chunks; ++c) {
      const std::int64_t prow = r.partial_begin + std::int64_t(c) * r.qo_len + t;
      m = std::max(m, p.partial_lse[prow * pr.num_qo_heads + h]);
    }
    std::fill(out.begin(), out.end(), 0.0f);
    float d = 0.0f;
    if (m != kNegInf) {
      for (std::int32_t c = 0; c < r.num_chunks; ++c) {
        const std::int64_t prow = r.partial_begin + std::int64_t(c) * r.qo_len + t;
        const float w = std::exp2(p.partial_lse[prow * pr.num_qo_heads + h] - m);
        if (w == 0.0f) continue;
        const float* po = p.partial_o + (prow * pr.num_qo_heads + h) * dvo;
        for (std::int64_t k = 0; k < dvo; ++k) out[k] += w * po[k];
        d += w;
      }
      for (std::int64_t k = 0; k < dvo; ++k) out[k] /= d;
    }
    auto* dst = static_cast<char*>(p.o.data()) +
                (mt.row * p.o.stride(0) + h * p.o.stride(1)) * std::int64_t(p.o.element_size());
    store_row(out.data(), pr.o_dtype, dst, dvo);
    if (p.lse.defined()) {
      p.lse.data_as<float>()[mt.row * p.lse.stride(0) + h * p.lse.stride(1)] =
          m == kNegInf ? kNegInf : m + std::log2(d);
    }
  }
}

}  // namespace

void run_attention(const AttentionParams& p) {
  const std::int64_t num_items = p.counts[0], num_merge = p.counts[1];
  parallel_for(num_items, [&](std::int64_t i) { run_item(p, p.items[i]); });
  parallel_for(num_merge, [&](std::int64_t i) { merge_token(p, p.merge_tokens[i]); });
}

}  // namespace kvinfer::cpu
