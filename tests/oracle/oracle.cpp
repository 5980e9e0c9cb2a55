// SPDX-License-Identifier: Apache-2.0
// The float64 oracle (see oracle.hpp): straight loops over the explicit mask and the
// full score row, no tiling, no online softmax, no shortcuts.
#include "oracle/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace kvinfer::oracle {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLn2 = 0.693147180559945309417232121458176568;

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("oracle: " + what);
}

void expect_size(std::span<const double> x, std::int64_t want, const char* name) {
  expect(std::int64_t(x.size()) == want, std::string(name) + " has " + std::to_string(x.size()) +
                                             " elements, expected " + std::to_string(want));
}

// Softmax of the visible scores of one row and the weighted sum of their values.
// scores[j] is ignored where visible[j] == 0. Writes o [dim] and returns the base-2 LSE.
double softmax_row(std::span<const double> scores, std::span<const std::uint8_t> visible,
                   std::int64_t dim, const auto& value_of, std::span<double> o) {
  double m = -kInf;
  for (std::size_t j = 0; j < scores.size(); ++j) {
    if (visible[j]) m = std::max(m, scores[j]);
  }
  std::fill(o.begin(), o.end(), 0.0);
  if (m == -kInf) return -kInf;  // no visible key: o = 0, lse = -inf
  double sum = 0.0;
  for (std::size_t j = 0; j < scores.size(); ++j) {
    if (!visible[j]) continue;
    const double p = std::exp(scores[j] - m);
    sum += p;
    const double* vj = value_of(std::int64_t(j));
    for (std::int64_t d = 0; d < dim; ++d) o[d] += p * vj[d];
  }
  for (std::int64_t d = 0; d < dim; ++d) o[d] /= sum;
  return (m + std::log(sum)) / kLn2;
}

}  // namespace

double AttentionSpec::effective_sm_scale() const {
  return sm_scale ? *sm_scale : 1.0 / std::sqrt(double(head_dim_qk));
}

AttentionSpec spec_from_options(const AttentionOptions& options, std::int64_t qo_len,
                                std::int64_t kv_len, std::int64_t num_qo_heads,
                                std::int64_t num_kv_heads, std::int64_t head_dim_qk,
                                std::int64_t head_dim_vo) {
  AttentionSpec s{.qo_len = qo_len, .kv_len = kv_len, .num_qo_heads = num_qo_heads, .num_kv_heads = num_kv_heads,
                  .head_dim_qk = head_dim_qk, .head_dim_vo = head_dim_vo, .mask_mode = options.mask_mode,
                  .window_left = options.window_left, .logits_soft_cap = options.logits_soft_cap,
                  .pos_encoding = options.pos_encoding, .rope_scale = options.rope_scale,
                  .rope_theta = options.rope_theta};
  if (options.sm_scale) s.sm_scale = double(*options.sm_scale);
  s.alibi_slopes.assign(options.alibi_slopes.begin(), options.alibi_slopes.end());
  return s;
}

std::vector<std::uint8_t> visibility(const AttentionSpec& spec) {
  expect(spec.qo_len >= 0 && spec.kv_len >= 0, "qo_len and kv_len must be >= 0");
  expect(spec.window_left >= -1, "window_left must be >= -1");
  if (spec.mask_mode == MaskMode::kCustom) {
    expect(std::int64_t(spec.custom_mask.size()) == spec.qo_len * spec.kv_len,
           "custom_mask must have qo_len * kv_len elements");
  } else {
    expect(spec.custom_mask.empty(), "custom_mask is set but mask_mode is not kCustom");
  }
  std::vector<std::uint8_t> vis(std::size_t(spec.qo_len * spec.kv_len), 0);
  for (std::int64_t i = 0; i < spec.qo_len; ++i) {
    const std::int64_t i_pos = i + spec.kv_len - spec.qo_len + spec.q_pos_offset;
    for (std::int64_t j = 0; j < spec.kv_len; ++j) {
      const std::int64_t j_pos = j + spec.kv_pos_offset;
      bool keep = true;
      if (spec.mask_mode == MaskMode::kCausal && j_pos > i_pos) keep = false;
      if (spec.window_left >= 0 && j_pos < i_pos - spec.window_left) keep = false;
      if (spec.mask_mode == MaskMode::kCustom && !spec.custom_mask[i * spec.kv_len + j]) keep = false;
      vis[i * spec.kv_len + j] = keep ? 1 : 0;
    }
  }
  return vis;
}

void apply_rope(std::span<double> x, double pos, double rope_scale, double rope_theta) {
  const std::size_t dim = x.size();
  expect(dim % 2 == 0, "RoPE needs an even head_dim");
  const std::size_t half = dim / 2;
  for (std::size_t d = 0; d < half; ++d) {
    const double freq = (1.0 / rope_scale) * std::pow(rope_theta, -2.0 * double(d) / double(dim));
    const double angle = pos * freq;
    const double c = std::cos(angle), s = std::sin(angle);
    const double a = x[d], b = x[d + half];
    x[d] = a * c - b * s;
    x[d + half] = b * c + a * s;
  }
}

AttentionResult attention(const AttentionSpec& spec, std::span<const double> q,
                          std::span<const double> k, std::span<const double> v) {
  const std::int64_t qo = spec.qo_len, kv = spec.kv_len;
  const std::int64_t hq = spec.num_qo_heads, hk = spec.num_kv_heads;
  const std::int64_t dqk = spec.head_dim_qk, dvo = spec.head_dim_vo;
  expect(hq >= 1 && hk >= 1 && hq % hk == 0, "num_qo_heads must be a multiple of num_kv_heads");
  expect(dqk >= 1 && dvo >= 1, "head dims must be >= 1");
  expect_size(q, qo * hq * dqk, "q");
  expect_size(k, kv * hk * dqk, "k");
  expect_size(v, kv * hk * dvo, "v");
  const bool rope = spec.pos_encoding == PosEncoding::kRopeLlama;
  const bool alibi = spec.pos_encoding == PosEncoding::kAlibi;
  std::vector<double> slopes;
  if (alibi) {
    slopes = spec.alibi_slopes.empty() ? alibi_slopes_reference(int(hq)) : spec.alibi_slopes;
    expect(std::int64_t(slopes.size()) == hq, "alibi_slopes must have num_qo_heads entries");
  }
  const std::vector<std::uint8_t> vis = visibility(spec);
  const double sm_scale = spec.effective_sm_scale();
  const std::int64_t group = hq / hk;

  // Keys with RoPE applied at their positions.
  std::vector<double> kr(k.begin(), k.end());
  if (rope) {
    for (std::int64_t j = 0; j < kv; ++j)
      for (std::int64_t h = 0; h < hk; ++h)
        apply_rope(std::span<double>(kr).subspan((j * hk + h) * dqk, dqk),
                   double(j + spec.kv_pos_offset), spec.rope_scale, spec.rope_theta);
  }

  AttentionResult r;
  r.o.assign(std::size_t(qo * hq * dvo), 0.0);
  r.lse.assign(std::size_t(qo * hq), -kInf);
  std::vector<double> qi(static_cast<std::size_t>(dqk)), scores(static_cast<std::size_t>(kv));
  for (std::int64_t i = 0; i < qo; ++i) {
    const std::int64_t i_pos = i + kv - qo + spec.q_pos_offset;
    const std::span<const std::uint8_t> row_vis(vis.data() + i * kv, std::size_t(kv));
    for (std::int64_t h = 0; h < hq; ++h) {
      const std::int64_t kvh = h / group;
      std::copy_n(q.begin() + (i * hq + h) * dqk, dqk, qi.begin());
      if (rope) apply_rope(qi, double(i_pos), spec.rope_scale, spec.rope_theta);
      for (std::int64_t j = 0; j < kv; ++j) {
        const double* kj = kr.data() + (j * hk + kvh) * dqk;
        double s = 0.0;
        for (std::int64_t d = 0; d < dqk; ++d) s += qi[d] * kj[d];
        s *= sm_scale;
        if (alibi) s += slopes[h] * double(j + spec.kv_pos_offset - i_pos);
        if (spec.logits_soft_cap > 0) s = spec.logits_soft_cap * std::tanh(s / spec.logits_soft_cap);
        scores[j] = s;
      }
      const auto value_of = [&](std::int64_t j) { return v.data() + (j * hk + kvh) * dvo; };
      r.lse[i * hq + h] =
          softmax_row(scores, row_vis, dvo, value_of,
                      std::span<double>(r.o).subspan((i * hq + h) * dvo, dvo));
    }
  }
  return r;
}

AttentionResult mla_attention(const MLASpec& spec, std::span<const double> q_nope,
                              std::span<const double> q_pe, std::span<const double> ckv,
                              std::span<const double> kpe) {
  const std::int64_t qo = spec.qo_len, kv = spec.kv_len, h = spec.num_heads;
  const std::int64_t dc = spec.head_dim_ckv, dp = spec.head_dim_kpe;
  expect(qo >= 0 && kv >= 0 && h >= 1 && dc >= 1 && dp >= 0, "bad MLA sizes");
  expect(spec.sm_scale > 0, "MLA sm_scale is required (> 0)");
  expect_size(q_nope, qo * h * dc, "q_nope");
  expect_size(q_pe, qo * h * dp, "q_pe");
  expect_size(ckv, kv * dc, "ckv");
  expect_size(kpe, kv * dp, "kpe");

  AttentionResult r;
  r.o.assign(std::size_t(qo * h * dc), 0.0);
  r.lse.assign(std::size_t(qo * h), -kInf);
  std::vector<double> scores(static_cast<std::size_t>(kv));
  std::vector<std::uint8_t> row_vis(static_cast<std::size_t>(kv));
  for (std::int64_t i = 0; i < qo; ++i) {
    for (std::int64_t j = 0; j < kv; ++j) row_vis[j] = !spec.causal || j <= i + kv - qo;
    for (std::int64_t hh = 0; hh < h; ++hh) {
      const double* qn = q_nope.data() + (i * h + hh) * dc;
      const double* qp = q_pe.data() + (i * h + hh) * dp;
      for (std::int64_t j = 0; j < kv; ++j) {
        double s = 0.0;
        for (std::int64_t d = 0; d < dc; ++d) s += qn[d] * ckv[j * dc + d];
        for (std::int64_t d = 0; d < dp; ++d) s += qp[d] * kpe[j * dp + d];
        scores[j] = s * spec.sm_scale;
      }
      const auto value_of = [&](std::int64_t j) { return ckv.data() + j * dc; };
      r.lse[i * h + hh] = softmax_row(scores, row_vis, dc, value_of,
                                      std::span<double>(r.o).subspan((i * h + hh) * dc, dc));
    }
  }
  return r;
}

AttentionResult merge_states(std::span<const AttentionResult> states) {
  expect(!states.empty(), "merge_states needs at least one state");
  const std::size_t rows = states[0].lse.size();
  const std::size_t total = states[0].o.size();
  expect(rows == 0 ? total == 0 : total % rows == 0, "o must be [rows, D] for lse [rows]");
  for (const AttentionResult& st : states) {
    expect(st.lse.size() == rows && st.o.size() == total, "states must have equal shapes");
  }
  const std::size_t dim = rows == 0 ? 0 : total / rows;
  AttentionResult r;
  r.o.assign(total, 0.0);
  r.lse.assign(rows, -kInf);
  for (std::size_t row = 0; row < rows; ++row) {
    double m = -kInf;
    for (const AttentionResult& st : states) m = std::max(m, st.lse[row]);
    if (m == -kInf) continue;  // every state empty: o = 0, lse = -inf
    double sum = 0.0;
    for (const AttentionResult& st : states) {
      if (st.lse[row] == -kInf) continue;  // an empty state has weight 0 whatever its o holds
      const double w = std::exp2(st.lse[row] - m);
      sum += w;
      for (std::size_t d = 0; d < dim; ++d) r.o[row * dim + d] += w * st.o[row * dim + d];
    }
    for (std::size_t d = 0; d < dim; ++d) r.o[row * dim + d] /= sum;
    r.lse[row] = m + std::log2(sum);
  }
  return r;
}

AttentionResult merge_state(const AttentionResult& a, const AttentionResult& b) {
  const AttentionResult both[] = {a, b};
  return merge_states(both);
}

AttentionResult merge_state(std::span<const double> o_a, std::span<const double> lse_a,
                            std::span<const double> o_b, std::span<const double> lse_b) {
  return merge_state(AttentionResult{{o_a.begin(), o_a.end()}, {lse_a.begin(), lse_a.end()}},
                     AttentionResult{{o_b.begin(), o_b.end()}, {lse_b.begin(), lse_b.end()}});
}

std::vector<double> alibi_slopes_reference(int num_heads) {
  expect(num_heads >= 1, "alibi_slopes_reference needs num_heads >= 1");
  // The ALiBi paper's get_slopes: for a power of two n, start = 2^(-2^-(log2(n) - 3))
  // and slope i = start * start^i; otherwise the slopes of the closest power of two
  // followed by every other slope of twice that, truncated.
  const auto power_of_2 = [](int n) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(double(n)) - 3.0)));
    std::vector<double> s;
    for (int i = 0; i < n; ++i) s.push_back(start * std::pow(start, double(i)));
    return s;
  };
  int closest = 1;
  while (closest * 2 <= num_heads) closest *= 2;
  std::vector<double> slopes = power_of_2(closest);
  if (closest == num_heads) return slopes;
  const std::vector<double> extra = alibi_slopes_reference(2 * closest);
  for (int i = 0; int(slopes.size()) < num_heads; i += 2) slopes.push_back(extra[i]);
  return slopes;
}

}  // namespace kvinfer::oracle
