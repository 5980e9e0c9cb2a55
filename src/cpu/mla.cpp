// SPDX-License-Identifier: Apache-2.0
// CPU execution of a planned MLA call. A work item attends a tile of packed query
// rows (tokens x heads of one request) to a chunk of the request's latent keys with
// an online base-2 softmax in float32: each block of ckv/kpe rows is converted once
// and shared by every head, since all heads read the same latent KV. Split requests
// are merged afterwards in chunk order, so results do not depend on the thread count.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/backend.hpp"
#include "core/mask_policy.hpp"
#include "cpu/convert.hpp"
#include "cpu/thread_pool.hpp"

namespace kvinfer::cpu {
namespace {

using detail::MLAParams;
using detail::RequestInfo;
using detail::TileClass;
using detail::WorkItem;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::int32_t kKeyBlock = 32;  // latent rows converted to float once per item and block

// Row `token` of a paged MLA tensor (ckv or kpe) for one request.
class LatentAddress {
 public:
  LatentAddress(const TensorView& t, const std::int32_t* pages, std::int64_t page_size)
      : base_(static_cast<const char*>(t.data())),
        elem_(std::int64_t(t.element_size())),
        page_stride_(t.stride(0)),
        token_stride_(t.stride(1)),
        page_size_(page_size),
        pages_(pages) {}
  const void* operator()(std::int32_t j) const {
    const std::int64_t page = pages_[j / page_size_];
    return base_ + (page * page_stride_ + (j % page_size_) * token_stride_) * elem_;
  }

 private:
  const char* base_;
  std::int64_t elem_, page_stride_, token_stride_, page_size_;
  const std::int32_t* pages_;
};

// Eight independent partial sums let the compiler vectorise the reduction without
// -ffast-math; the summation order is fixed, so results stay deterministic.
float dot(const float* a, const float* b, std::int64_t n) {
  float acc[8] = {};
  std::int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[d + k] * b[d + k];
  }
  for (; d < n; ++d) acc[0] += a[d] * b[d];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

const void* row_ptr(const TensorView& t, std::int64_t i, std::int64_t h) {
  return static_cast<const char*>(t.data()) +
         (i * t.stride(0) + h * t.stride(1)) * std::int64_t(t.element_size());
}

void store_lse(const MLAParams& p, std::int64_t row, std::int64_t head, float lse_base2) {
  if (!p.lse.defined()) return;
  // -inf stays -inf in either base.
  p.lse.data_as<float>()[row * p.lse.stride(0) + head * p.lse.stride(1)] =
      p.lse_base_e ? lse_base2 * kLn2 : lse_base2;
}

struct RowState {
  float m = kNegInf;  // running max of base-2 scores
  float d = 0.0f;     // running sum of 2^(s - m)
};

void run_item(const MLAParams& p, const WorkItem& item) {
  const auto& pr = p.problem;
  const RequestInfo& r = p.requests[item.request];
  const std::int64_t heads = pr.num_heads, dc = pr.head_dim_ckv, dp = pr.head_dim_kpe;
  const std::int32_t nrows = item.row_end - item.row_begin;

  detail::RequestMask mask;
  mask.causal = pr.causal;
  mask.qo_len = r.qo_len;
  mask.kv_len = r.kv_len;

  // Query rows: packed row = token * heads + head. sm_scale * log2(e) and the fp8
  // scales of the two logit terms are folded into q once, so a score is two dots.
  const float nope_scale = pr.sm_scale * kLog2e * p.ckv_scale;
  const float pe_scale = pr.sm_scale * kLog2e * p.kpe_scale;
  std::vector<float> qn(std::size_t(nrows) * dc), qp(std::size_t(nrows) * dp);
  std::vector<float> acc(std::size_t(nrows) * dc, 0.0f);
  std::vector<std::int32_t> token(nrows), head(nrows);
  std::vector<RowState> state(nrows);
  for (std::int32_t i = 0; i < nrows; ++i) {
    const std::int32_t row = item.row_begin + i;
    token[i] = std::int32_t(row / heads);
    head[i] = std::int32_t(row % heads);
    const std::int64_t qrow = r.qo_begin + token[i];
    float* qni = &qn[std::size_t(i) * dc];
    load_row(row_ptr(p.q_nope, qrow, head[i]), pr.q_dtype, qni, dc);
    for (std::int64_t d = 0; d < dc; ++d) qni[d] *= nope_scale;
    if (dp > 0) {
      float* qpi = &qp[std::size_t(i) * dp];
      load_row(row_ptr(p.q_pe, qrow, head[i]), pr.q_dtype, qpi, dp);
      for (std::int64_t d = 0; d < dp; ++d) qpi[d] *= pe_scale;
    }
  }

  const std::int32_t* pages = p.kv_indices.data_as<const std::int32_t>() + r.kv_begin;
  const LatentAddress ckv_addr(p.ckv, pages, pr.page_size);
  const LatentAddress kpe_addr = dp > 0 ? LatentAddress(p.kpe, pages, pr.page_size) : ckv_addr;
  std::vector<float> cb(std::size_t(kKeyBlock) * dc), pb(std::size_t(kKeyBlock) * dp);
  std::vector<float> s(kKeyBlock);
  const std::int32_t tok_first = token[0], tok_last = token[nrows - 1] + 1;

  for (std::int32_t j0 = item.kv_begin; j0 < item.kv_end; j0 += kKeyBlock) {
    const std::int32_t nk = std::min(kKeyBlock, item.kv_end - j0);
    const TileClass tile = mask.classify(tok_first, tok_last, j0, j0 + nk);
    if (tile == TileClass::kEmpty) continue;
    for (std::int32_t j = 0; j < nk; ++j) {
      load_row(ckv_addr(j0 + j), pr.kv_dtype, &cb[std::size_t(j) * dc], dc);
      if (dp > 0) load_row(kpe_addr(j0 + j), pr.kv_dtype, &pb[std::size_t(j) * dp], dp);
    }
    for (std::int32_t i = 0; i < nrows; ++i) {
      const float* qni = &qn[std::size_t(i) * dc];
      const float* qpi = &qp[std::size_t(i) * dp];
      float block_max = kNegInf;
      for (std::int32_t j = 0; j < nk; ++j) {
        float score = dot(qni, &cb[std::size_t(j) * dc], dc);
        if (dp > 0) score += dot(qpi, &pb[std::size_t(j) * dp], dp);
        if (tile == TileClass::kPartial && !mask.visible(token[i], j0 + j)) score = kNegInf;
        s[j] = score;
        block_max = std::max(block_max, score);
      }
      if (block_max == kNegInf) continue;  // nothing visible to this row here
      RowState& st = state[i];
      const float m_new = std::max(st.m, block_max);
      const float rescale = std::exp2(st.m - m_new);  // 0 when st.m is -inf
      float* ai = &acc[std::size_t(i) * dc];
      if (rescale != 1.0f) {
        for (std::int64_t d = 0; d < dc; ++d) ai[d] *= rescale;
      }
      float sum = 0.0f;
      for (std::int32_t j = 0; j < nk; ++j) {
        const float w = std::exp2(s[j] - m_new);
        if (w == 0.0f) continue;
        sum += w;
        const float* cj = &cb[std::size_t(j) * dc];
        for (std::int64_t d = 0; d < dc; ++d) ai[d] += w * cj[d];
      }
      st.d = st.d * rescale + sum;
      st.m = m_new;
    }
  }

  // Epilogue: the final output, or a partial state of this chunk. The value is
  // ckv * ckv_scale, applied once here.
  const bool split = r.num_chunks > 1;
  std::vector<float> out_row(dc);
  for (std::int32_t i = 0; i < nrows; ++i) {
    const RowState& st = state[i];
    const float* ai = &acc[std::size_t(i) * dc];
    const bool empty = st.d == 0.0f;
    const float norm = empty ? 0.0f : p.ckv_scale / st.d;
    const float lse = empty ? kNegInf : st.m + std::log2(st.d);
    if (split) {
      const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + token[i];
      float* po = p.partial_o + (prow * heads + head[i]) * dc;
      for (std::int64_t d = 0; d < dc; ++d) po[d] = ai[d] * norm;
      p.partial_lse[prow * heads + head[i]] = lse;
      continue;
    }
    for (std::int64_t d = 0; d < dc; ++d) out_row[d] = ai[d] * norm;
    const std::int64_t orow = r.qo_begin + token[i];
    store_row(out_row.data(), pr.o_dtype, const_cast<void*>(row_ptr(p.o, orow, head[i])), dc);
    store_lse(p, orow, head[i], lse);
  }
}

// Merges the chunks of one split query row, in chunk order, for every head.
void merge_token(const MLAParams& p, const detail::MergeToken& mt) {
  const auto& pr = p.problem;
  const RequestInfo& r = p.requests[mt.request];
  const std::int64_t t = mt.row - r.qo_begin;
  const std::int64_t heads = pr.num_heads, dc = pr.head_dim_ckv;
  std::vector<float> out(dc);
  for (std::int64_t h = 0; h < heads; ++h) {
    const auto partial = [&](std::int32_t c) {
      return (r.partial_begin + std::int64_t(c) * r.qo_len + t) * heads + h;
    };
    float m = kNegInf;
    for (std::int32_t c = 0; c < r.num_chunks; ++c) m = std::max(m, p.partial_lse[partial(c)]);
    std::fill(out.begin(), out.end(), 0.0f);
    float d = 0.0f;
    if (m != kNegInf) {
      for (std::int32_t c = 0; c < r.num_chunks; ++c) {
        const float w = std::exp2(p.partial_lse[partial(c)] - m);
        if (w == 0.0f) continue;  // an empty chunk: its o is 0 and carries no weight
        const float* po = p.partial_o + partial(c) * dc;
        for (std::int64_t k = 0; k < dc; ++k) out[k] += w * po[k];
        d += w;
      }
      for (std::int64_t k = 0; k < dc; ++k) out[k] /= d;
    }
    store_row(out.data(), pr.o_dtype, const_cast<void*>(row_ptr(p.o, mt.row, h)), dc);
    store_lse(p, mt.row, h, m == kNegInf ? kNegInf : m + std::log2(d));
  }
}

}  // namespace

void CpuBackend::run_mla(const MLAParams& p) const {
  const std::int64_t num_items = p.counts[0], num_merge = p.counts[1];
  parallel_for(num_items, [&](std::int64_t i) { run_item(p, p.items[i]); });
  parallel_for(num_merge, [&](std::int64_t i) { merge_token(p, p.merge_tokens[i]); });
}

}  // namespace kvinfer::cpu
