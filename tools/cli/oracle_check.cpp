// SPDX-License-Identifier: Apache-2.0
#include "oracle_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "oracle/oracle.hpp"

namespace kvinfer::cli {
namespace {

// Query rows compared per prefill segment: the last ones, which see the most keys
// (the oracle cost grows with rows x keys).
constexpr std::int32_t kMaxPrefillRows = 16;
constexpr std::size_t kMaxPrefillSegments = 2;
constexpr std::size_t kMaxDecodeSegments = 4;

double to_double(const void* p, DType t) {
  switch (t) {
    case DType::kF32:
      return *static_cast<const float*>(p);
    case DType::kF16:
      return f16_to_f32(*static_cast<const std::uint16_t*>(p));
    case DType::kBF16:
      return bf16_to_f32(*static_cast<const std::uint16_t*>(p));
    case DType::kE4M3:
      return e4m3_to_f32(*static_cast<const std::uint8_t*>(p));
    case DType::kE5M2:
      return e5m2_to_f32(*static_cast<const std::uint8_t*>(p));
    default:
      return std::nan("");
  }
}

// A host copy of a (contiguous-rows) device tensor, or the host tensor itself.
struct HostView {
  Tensor storage;
  TensorView view;
  explicit HostView(const TensorView& t) {
    if (t.device().is_cpu()) {
      view = t;
    } else {
      storage = Tensor::empty(t.shape(), t.dtype());
      copy(storage, t);
      view = storage.view();
    }
  }
  const char* row(std::int64_t i, std::int64_t h) const {
    return static_cast<const char*>(view.data()) +
           (i * view.stride(0) + h * view.stride(1)) * std::int64_t(view.element_size());
  }
};

// Rows of one layer's page storage ([pages, page_size, H, D] NHD, or MLA's
// [pages, page_size, W]) read on the host; pages on a GPU are copied once each.
class PageReader {
 public:
  explicit PageReader(const TensorView& storage)
      : storage_(storage), elem_(std::int64_t(storage.element_size())) {}
  const char* row(std::int32_t page, std::int64_t slot, std::int64_t head = 0) {
    const bool heads = storage_.rank() == 4;
    if (storage_.device().is_cpu()) {
      return static_cast<const char*>(storage_.data()) +
             (page * storage_.stride(0) + slot * storage_.stride(1) +
              (heads ? head * storage_.stride(2) : 0)) *
                 elem_;
    }
    auto [it, added] = copies_.try_emplace(page);
    const TensorView p = storage_.select(0, page);
    if (added) {
      it->second = Tensor::empty(p.shape(), p.dtype());
      if (p.is_contiguous()) {
        copy(it->second, p);
      } else {
        for (std::int64_t t = 0; t < p.size(0); ++t) copy(it->second.view().select(0, t), p.select(0, t));
      }
    }
    const TensorView& h = it->second.view();
    return static_cast<const char*>(h.data()) +
           (slot * h.stride(0) + (heads ? head * h.stride(1) : 0)) * elem_;
  }

 private:
  TensorView storage_;
  std::int64_t elem_;
  std::map<std::int32_t, Tensor> copies_;
};

void read_row(const char* p, DType t, std::int64_t n, std::vector<double>& out) {
  const auto es = std::int64_t(dtype_size(t));
  for (std::int64_t e = 0; e < n; ++e) out.push_back(to_double(p + e * es, t));
}

}  // namespace

OracleCheck::OracleCheck(const ModelShape& model, std::int32_t page_size, std::int64_t every)
    : model_(model), page_size_(page_size), every_(std::max<std::int64_t>(1, every)) {
  // Outputs are rounded to q/o's precision (bf16: 2^-8 relative), on values of order 1.
  summary_.atol = model.q_dtype == DType::kBF16 ? 2e-2 : 5e-3;
  summary_.rtol = model.q_dtype == DType::kBF16 ? 1e-2 : 2e-3;
}

bool OracleCheck::wants(std::int64_t step_index, int layer) const {
  if (step_index % every_ != 0) return false;
  return layer == int((step_index / every_) % model_.num_layers);
}

std::vector<const CheckSegment*> OracleCheck::sample(std::int64_t step,
                                                     const std::vector<CheckSegment>& segments) const {
  std::vector<const CheckSegment*> prefill, decode, picked;
  for (const CheckSegment& s : segments)
    (s.qo_len > 1 || s.label.rfind("prefill", 0) == 0 ? prefill : decode).push_back(&s);
  // Rotate through the segments from step to step; cascade rows come last in a batch,
  // so take from both ends.
  auto take = [&](std::vector<const CheckSegment*>& from, std::size_t n) {
    if (from.empty()) return;
    const std::size_t start = std::size_t(step) % from.size();
    for (std::size_t i = 0; i < std::min(n, from.size()); ++i) {
      const std::size_t k =
          i % 2 == 0 ? (start + i / 2) % from.size() : from.size() - 1 - (start + i / 2) % from.size();
      if (std::find(picked.begin(), picked.end(), from[k]) == picked.end()) picked.push_back(from[k]);
    }
  };
  take(prefill, kMaxPrefillSegments);
  take(decode, kMaxDecodeSegments);
  return picked;
}

namespace {

void compare(const std::string& where, const CheckSegment& seg, std::int32_t rows_checked, std::int64_t heads,
             std::int64_t dim, const oracle::AttentionResult& ref, const HostView& out, DType o_dtype,
             const HostView& lse, CheckSummary& sum, bool& inject_fault) {
  const std::int64_t first = seg.row_begin + seg.qo_len - rows_checked;
  for (std::int32_t i = 0; i < rows_checked; ++i) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const char* o = out.row(first + i, h);
      for (std::int64_t e = 0; e < dim; ++e) {
        double got = to_double(o + e * std::int64_t(dtype_size(o_dtype)), o_dtype);
        if (inject_fault) {
          got += 1.0;
          inject_fault = false;
        }
        const double want = ref.o[std::size_t((i * heads + h) * dim + e)];
        const double err = std::abs(got - want);
        const double tol = sum.atol + sum.rtol * std::abs(want);
        if (!(err <= tol)) {
          throw CheckFailure(
              fmt::format("{}: {}, query row {} of {} (kv_len {}), head {}, element {}: output {:.6g}, "
                          "float64 oracle {:.6g} "
                          "(|error| {:.3g} > tolerance {:.3g})",
                          where, seg.label, seg.qo_len - rows_checked + i, seg.qo_len, seg.kv_len, h, e, got,
                          want, err, tol));
        }
        sum.max_err_o = std::max(sum.max_err_o, err);
      }
      const double got_lse = *reinterpret_cast<const float*>(lse.row(first + i, h));
      const double want_lse = ref.lse[std::size_t(i * heads + h)];
      const double err = std::abs(got_lse - want_lse);
      const double tol = sum.atol + 1e-3 * std::abs(want_lse);
      if (!(err <= tol)) {
        throw CheckFailure(
            fmt::format("{}: {}, query row {} of {} (kv_len {}), head {}: LSE {:.6g}, float64 oracle "
                        "{:.6g} (|error| {:.3g} > tolerance {:.3g})",
                        where, seg.label, seg.qo_len - rows_checked + i, seg.qo_len, seg.kv_len, h, got_lse,
                        want_lse, err, tol));
      }
      sum.max_err_lse = std::max(sum.max_err_lse, err);
    }
  }
  ++sum.segments;
  sum.rows += std::int64_t(rows_checked) * heads;
}

}  // namespace

void OracleCheck::check_gqa(std::int64_t step, int layer, const TensorView& q, const TensorView& out,
                            const TensorView& lse, const PagedKVCache& cache,
                            const std::vector<CheckSegment>& segments) {
  const std::int64_t hq = model_.num_qo_heads, hk = model_.num_kv_heads, d = model_.head_dim;
  const HostView qh(q), oh(out), lh(lse);
  PageReader kr(cache.k), vr(cache.v);  // the engine's cache is NHD
  const std::string where = fmt::format("check failed at step {}, layer {}", step, layer);
  for (const CheckSegment* seg : sample(step, segments)) {
    const std::int32_t rows = std::min(seg->qo_len, kMaxPrefillRows);
    std::vector<double> qd, kd, vd;
    for (std::int32_t i = seg->qo_len - rows; i < seg->qo_len; ++i)
      for (std::int64_t h = 0; h < hq; ++h) read_row(qh.row(seg->row_begin + i, h), model_.q_dtype, d, qd);
    for (std::int32_t j = 0; j < seg->kv_len; ++j) {
      const std::int32_t page = seg->pages[std::size_t(j / page_size_)], slot = j % page_size_;
      for (std::int64_t h = 0; h < hk; ++h) {
        read_row(kr.row(page, slot, h), model_.kv_dtype, d, kd);
        read_row(vr.row(page, slot, h), model_.kv_dtype, d, vd);
      }
    }
    oracle::AttentionSpec spec;
    spec.qo_len = rows;  // the last rows: bottom-right causal alignment keeps their positions
    spec.kv_len = seg->kv_len;
    spec.num_qo_heads = hq;
    spec.num_kv_heads = hk;
    spec.head_dim_qk = d;
    spec.head_dim_vo = d;
    spec.mask_mode = MaskMode::kCausal;
    spec.sm_scale = double(model_.sm_scale());
    const oracle::AttentionResult ref = oracle::attention(spec, qd, kd, vd);
    compare(where, *seg, rows, hq, d, ref, oh, model_.q_dtype, lh, summary_, inject_fault_);
  }
  ++summary_.layer_steps;
}

void OracleCheck::check_mla(std::int64_t step, int layer, const TensorView& q_nope, const TensorView& q_pe,
                            const TensorView& out, const TensorView& lse, const MLACache& cache,
                            const std::vector<CheckSegment>& segments) {
  const std::int64_t h = model_.num_qo_heads, dc = model_.head_dim_ckv, dp = model_.head_dim_kpe;
  const HostView qn(q_nope), qp(q_pe), oh(out), lh(lse);
  PageReader cr(cache.ckv), pr(cache.kpe);
  const std::string where = fmt::format("check failed at step {}, layer {}", step, layer);
  for (const CheckSegment* seg : sample(step, segments)) {
    const std::int32_t rows = std::min(seg->qo_len, kMaxPrefillRows);
    std::vector<double> qnd, qpd, ckv, kpe;
    for (std::int32_t i = seg->qo_len - rows; i < seg->qo_len; ++i) {
      for (std::int64_t hh = 0; hh < h; ++hh) {
        read_row(qn.row(seg->row_begin + i, hh), model_.q_dtype, dc, qnd);
        read_row(qp.row(seg->row_begin + i, hh), model_.q_dtype, dp, qpd);
      }
    }
    for (std::int32_t j = 0; j < seg->kv_len; ++j) {
      const std::int32_t page = seg->pages[std::size_t(j / page_size_)], slot = j % page_size_;
      read_row(cr.row(page, slot), model_.kv_dtype, dc, ckv);
      read_row(pr.row(page, slot), model_.kv_dtype, dp, kpe);
    }
    oracle::MLASpec spec;
    spec.qo_len = rows;
    spec.kv_len = seg->kv_len;
    spec.num_heads = h;
    spec.head_dim_ckv = dc;
    spec.head_dim_kpe = dp;
    spec.causal = true;
    spec.sm_scale = double(model_.sm_scale());
    const oracle::AttentionResult ref = oracle::mla_attention(spec, qnd, qpd, ckv, kpe);
    compare(where, *seg, rows, h, dc, ref, oh, model_.q_dtype, lh, summary_, inject_fault_);
  }
  ++summary_.layer_steps;
}

}  // namespace kvinfer::cli
