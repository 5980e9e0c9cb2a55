// SPDX-License-Identifier: Apache-2.0
// CPU execution of a planned MLA call. A work item attends a tile of packed query
// rows (tokens x heads of one request) to a chunk of the request's latent keys with
// an online base-2 softmax in float32: each block of ckv/kpe rows is converted once
// and shared by every head, since all heads read the same latent KV. Split requests
// are merged afterwards in chunk order, so results do not depend on the thread count.
// Working buffers come from the thread's Scratch (mla_scratch_bytes, reserved at plan
// time); key positions are int64; non-finite values follow the rule of
// kvinfer/attention/options.hpp.

#include <algorithm>
#include <cmath>
#include <limits>

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
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
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
  const void* operator()(std::int64_t j) const {
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
  float d = 0.0f;     // running sum of 2^(s - m); NaN once a non-finite logit poisoned the row
};

// The buffers of one work item, taken from the thread's Scratch.
struct ItemBuffers {
  float *qn, *qp, *acc, *cb, *pb, *s, *out_row;
  std::int32_t *token, *head;
  RowState* state;

  static std::size_t bytes(std::int64_t rows, std::int64_t dc, std::int64_t dp) {
    const auto r = std::size_t(rows), c = std::size_t(dc), e = std::size_t(dp), kb = std::size_t(kKeyBlock);
    return Scratch::bytes_for<float>(r * c) + Scratch::bytes_for<float>(r * e) + Scratch::bytes_for<float>(r * c) +
           Scratch::bytes_for<float>(kb * c) + Scratch::bytes_for<float>(kb * e) + Scratch::bytes_for<float>(kb) +
           Scratch::bytes_for<float>(c) + 2 * Scratch::bytes_for<std::int32_t>(r) +
           Scratch::bytes_for<RowState>(r);
  }
  ItemBuffers(Scratch& sc, std::int64_t rows, std::int64_t dc, std::int64_t dp) {
    const auto r = std::size_t(rows), c = std::size_t(dc), e = std::size_t(dp), kb = std::size_t(kKeyBlock);
    sc.begin(bytes(rows, dc, dp));
    qn = sc.take<float>(r * c);
    qp = sc.take<float>(r * e);
    acc = sc.take<float>(r * c);
    cb = sc.take<float>(kb * c);
    pb = sc.take<float>(kb * e);
    s = sc.take<float>(kb);
    out_row = sc.take<float>(c);
    token = sc.take<std::int32_t>(r);
    head = sc.take<std::int32_t>(r);
    state = sc.take<RowState>(r);
  }
};

void run_item(const MLAParams& p, const WorkItem& item, Scratch& scratch) {
  const auto& pr = p.problem;
  const RequestInfo& r = p.schedule.requests[item.request];
  const std::int64_t heads = pr.num_heads, dc = pr.head_dim_ckv, dp = pr.head_dim_kpe;
  const std::int32_t nrows = item.row_end - item.row_begin;
  const ItemBuffers b(scratch, nrows, dc, dp);

  detail::RequestMask mask;
  mask.causal = pr.causal;
  mask.qo_len = r.qo_len;
  mask.kv_len = r.kv_len;

  // Query rows: packed row = token * heads + head. sm_scale * log2(e) and the fp8
  // scales of the two logit terms are folded into q once, so a score is two dots.
  const float nope_scale = pr.sm_scale * kLog2e * p.ckv_scale;
  const float pe_scale = pr.sm_scale * kLog2e * p.kpe_scale;
  std::fill(b.acc, b.acc + std::size_t(nrows) * dc, 0.0f);
  for (std::int32_t i = 0; i < nrows; ++i) {
    const std::int32_t row = item.row_begin + i;
    b.token[i] = std::int32_t(row / heads);
    b.head[i] = std::int32_t(row % heads);
    b.state[i] = RowState{};
    const std::int64_t qrow = r.qo_begin + b.token[i];
    float* qni = b.qn + std::size_t(i) * dc;
    load_row(row_ptr(p.q_nope, qrow, b.head[i]), pr.q_dtype, qni, dc);
    for (std::int64_t d = 0; d < dc; ++d) qni[d] *= nope_scale;
    if (dp > 0) {
      float* qpi = b.qp + std::size_t(i) * dp;
      load_row(row_ptr(p.q_pe, qrow, b.head[i]), pr.q_dtype, qpi, dp);
      for (std::int64_t d = 0; d < dp; ++d) qpi[d] *= pe_scale;
    }
  }

  const std::int32_t* pages = p.kv_indices.data_as<const std::int32_t>() + r.kv_begin;
  const LatentAddress ckv_addr(p.ckv, pages, pr.page_size);
  const LatentAddress kpe_addr = dp > 0 ? LatentAddress(p.kpe, pages, pr.page_size) : ckv_addr;
  const std::int32_t tok_first = b.token[0], tok_last = b.token[nrows - 1] + 1;

  for (std::int64_t j0 = item.kv_begin; j0 < item.kv_end; j0 += kKeyBlock) {
    const std::int64_t nk = std::min<std::int64_t>(kKeyBlock, item.kv_end - j0);
    const TileClass tile = mask.classify(tok_first, tok_last, std::int32_t(j0), std::int32_t(j0 + nk));
    if (tile == TileClass::kEmpty) continue;
    for (std::int64_t j = 0; j < nk; ++j) {
      load_row(ckv_addr(j0 + j), pr.kv_dtype, b.cb + std::size_t(j) * dc, dc);
      if (dp > 0) load_row(kpe_addr(j0 + j), pr.kv_dtype, b.pb + std::size_t(j) * dp, dp);
    }
    for (std::int32_t i = 0; i < nrows; ++i) {
      RowState& st = b.state[i];
      if (std::isnan(st.d)) continue;  // poisoned: stays NaN
      const float* qni = b.qn + std::size_t(i) * dc;
      const float* qpi = b.qp + std::size_t(i) * dp;
      float block_max = kNegInf;
      bool non_finite = false;
      for (std::int64_t j = 0; j < nk; ++j) {
        float score = dot(qni, b.cb + std::size_t(j) * dc, dc);
        if (dp > 0) score += dot(qpi, b.pb + std::size_t(j) * dp, dp);
        if (tile == TileClass::kPartial && !mask.visible(b.token[i], std::int32_t(j0 + j))) score = kNegInf;
        non_finite |= !(score < kInf);  // NaN or +inf
        b.s[j] = score;
        block_max = std::max(block_max, score);
      }
      float* ai = b.acc + std::size_t(i) * dc;
      if (non_finite) {
        st.m = st.d = kNaN;
        std::fill(ai, ai + dc, kNaN);
        continue;
      }
      if (block_max == kNegInf) continue;  // nothing visible to this row here
      const float m_new = std::max(st.m, block_max);
      const float rescale = std::exp2(st.m - m_new);  // 0 when st.m is -inf
      if (rescale != 1.0f) {
        for (std::int64_t d = 0; d < dc; ++d) ai[d] *= rescale;
      }
      float sum = 0.0f;
      for (std::int64_t j = 0; j < nk; ++j) {
        const float w = std::exp2(b.s[j] - m_new);
        if (w == 0.0f) continue;  // a masked key's value row may hold anything
        sum += w;
        const float* cj = b.cb + std::size_t(j) * dc;
        for (std::int64_t d = 0; d < dc; ++d) ai[d] += w * cj[d];
      }
      st.d = st.d * rescale + sum;
      st.m = m_new;
    }
  }

  // Epilogue: the final output, or a partial state of this chunk. The value is
  // ckv * ckv_scale, applied once here.
  const bool split = r.num_chunks > 1;
  for (std::int32_t i = 0; i < nrows; ++i) {
    const RowState& st = b.state[i];
    const float* ai = b.acc + std::size_t(i) * dc;
    const bool empty = st.d == 0.0f;
    const float norm = empty ? 0.0f : p.ckv_scale / st.d;
    const float lse = empty ? kNegInf : st.m + std::log2(st.d);
    if (split) {
      const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + b.token[i];
      float* po = p.schedule.partial_o + (prow * heads + b.head[i]) * dc;
      for (std::int64_t d = 0; d < dc; ++d) po[d] = ai[d] * norm;
      p.schedule.partial_lse[prow * heads + b.head[i]] = lse;
      continue;
    }
    for (std::int64_t d = 0; d < dc; ++d) b.out_row[d] = ai[d] * norm;
    const std::int64_t orow = r.qo_begin + b.token[i];
    store_row(b.out_row, pr.o_dtype, const_cast<void*>(row_ptr(p.o, orow, b.head[i])), dc);
    store_lse(p, orow, b.head[i], lse);
  }
}

// Merges the chunks of one split query row, in chunk order, for every head; a
// chunk whose LSE is NaN makes the row NaN.
void merge_token(const MLAParams& p, const detail::MergeToken& mt, Scratch& scratch) {
  const auto& pr = p.problem;
  const RequestInfo& r = p.schedule.requests[mt.request];
  const std::int64_t t = mt.row - r.qo_begin;
  const std::int64_t heads = pr.num_heads, dc = pr.head_dim_ckv;
  scratch.begin(Scratch::bytes_for<float>(std::size_t(dc)));
  float* out = scratch.take<float>(std::size_t(dc));
  for (std::int64_t h = 0; h < heads; ++h) {
    const auto partial = [&](std::int32_t c) {
      return (r.partial_begin + std::int64_t(c) * r.qo_len + t) * heads + h;
    };
    float m = kNegInf;
    bool nan = false;
    for (std::int32_t c = 0; c < r.num_chunks; ++c) {
      nan |= std::isnan(p.schedule.partial_lse[partial(c)]);
      m = std::max(m, p.schedule.partial_lse[partial(c)]);
    }
    std::fill(out, out + dc, nan ? kNaN : 0.0f);
    float d = 0.0f;
    if (!nan && m != kNegInf) {
      for (std::int32_t c = 0; c < r.num_chunks; ++c) {
        const float w = std::exp2(p.schedule.partial_lse[partial(c)] - m);
        if (w == 0.0f) continue;  // an empty chunk: its o is 0 and carries no weight
        const float* po = p.schedule.partial_o + partial(c) * dc;
        for (std::int64_t k = 0; k < dc; ++k) out[k] += w * po[k];
        d += w;
      }
      for (std::int64_t k = 0; k < dc; ++k) out[k] /= d;
    }
    store_row(out, pr.o_dtype, const_cast<void*>(row_ptr(p.o, mt.row, h)), dc);
    store_lse(p, mt.row, h, nan ? kNaN : (m == kNegInf ? kNegInf : m + std::log2(d)));
  }
}

}  // namespace

std::size_t mla_scratch_bytes(const detail::MLAProblem& pr, std::int64_t q_tile_rows) {
  return std::max(ItemBuffers::bytes(q_tile_rows, pr.head_dim_ckv, pr.head_dim_kpe),
                  Scratch::bytes_for<float>(std::size_t(pr.head_dim_ckv)));
}

void CpuBackend::run_mla(const MLAParams& p) const {
  const std::int64_t num_items = p.schedule.counts[0], num_merge = p.schedule.counts[1];
  parallel_for(num_items,
               [&](std::int64_t i, Scratch& scratch) { run_item(p, p.schedule.items[i], scratch); });
  parallel_for(num_merge, [&](std::int64_t i, Scratch& scratch) {
    merge_token(p, p.schedule.merge_tokens[i], scratch);
  });
}

}  // namespace kvinfer::cpu
