// SPDX-License-Identifier: Apache-2.0
#include "testing/attention_case.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include "oracle/oracle.hpp"
#include "testing/host_buffer.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The padding that makes a strided view: every row stride grows, the last dim stays
// contiguous.
std::vector<std::int64_t> stride_pad(std::size_t rank, bool strided) {
  if (!strided) return {};
  std::vector<std::int64_t> pad(rank, 1);
  pad.back() = 8;
  return pad;
}

// fp32 naive attention of one request, on inputs already in their stored
// precision: the "naive" of the tolerance model. RoPE'd queries and keys are
// operands in their own right, held in the 16-bit type the products take
// (`rotated_q`, `rotated_k`), as tensor-core kernels must; where fp16 and bf16 mix,
// the tensor-core tile's products take bf16 (`operands`: q, k and v rounded to it).
oracle::AttentionResult naive_f32(const oracle::AttentionSpec& spec, std::span<const double> q,
                                  std::span<const double> k, std::span<const double> v, DType o_dtype,
                                  DType rotated_q, DType rotated_k, std::optional<DType> operands) {
  const auto operand = [&](double x) { return operands ? round_to(float(x), *operands) : float(x); };
  const std::int64_t qo = spec.qo_len, kv = spec.kv_len, hq = spec.num_qo_heads, hk = spec.num_kv_heads;
  const std::int64_t dqk = spec.head_dim_qk, dvo = spec.head_dim_vo, group = hq / hk;
  const std::vector<std::uint8_t> vis = oracle::visibility(spec);
  const float scale = float(spec.effective_sm_scale());
  std::vector<double> slopes = spec.alibi_slopes;
  if (spec.pos_encoding == PosEncoding::kAlibi && slopes.empty()) {
    for (float s : alibi_slopes(int(hq))) slopes.push_back(s);
  }
  auto rope = [&](std::vector<float>& x, std::int64_t pos) {
    const std::int64_t half = dqk / 2;
    for (std::int64_t d = 0; d < half; ++d) {
      const float freq = float(1.0 / spec.rope_scale) * std::pow(float(1.0 / spec.rope_theta), float(2 * d) / float(dqk));
      const float a = float(pos) * freq, c = std::cos(a), s = std::sin(a);
      const float x0 = x[d], x1 = x[d + half];
      x[d] = x0 * c - x1 * s;
      x[d + half] = x1 * c + x0 * s;
    }
  };
  auto rope_rounded = [&](std::vector<float>& x, std::int64_t pos, DType t) {
    rope(x, pos);
    for (float& e : x) e = round_to(e, t);
  };
  oracle::AttentionResult r;
  r.o.assign(std::size_t(qo * hq * dvo), 0.0);
  r.lse.assign(std::size_t(qo * hq), kNegInf);
  std::vector<float> kk(static_cast<std::size_t>(kv * dqk)), qq(static_cast<std::size_t>(dqk));
  std::vector<float> s(static_cast<std::size_t>(kv)), acc(static_cast<std::size_t>(dvo));
  for (std::int64_t h = 0; h < hq; ++h) {
    const std::int64_t g = h / group;
    for (std::int64_t j = 0; j < kv; ++j) {
      std::vector<float> row(static_cast<std::size_t>(dqk));
      for (std::int64_t d = 0; d < dqk; ++d) row[d] = operand(k[(j * hk + g) * dqk + d]);
      if (spec.pos_encoding == PosEncoding::kRopeLlama) rope_rounded(row, j, rotated_k);
      std::copy(row.begin(), row.end(), kk.begin() + j * dqk);
    }
    for (std::int64_t i = 0; i < qo; ++i) {
      const std::int64_t i_pos = i + kv - qo;
      for (std::int64_t d = 0; d < dqk; ++d) qq[d] = operand(q[(i * hq + h) * dqk + d]);
      if (spec.pos_encoding == PosEncoding::kRopeLlama) rope_rounded(qq, i_pos, rotated_q);
      float m = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j < kv; ++j) {
        if (!vis[std::size_t(i * kv + j)]) {
          s[j] = -std::numeric_limits<float>::infinity();
          continue;
        }
        float dot = 0;
        for (std::int64_t d = 0; d < dqk; ++d) dot += qq[d] * kk[j * dqk + d];
        float x = dot * scale;
        if (spec.pos_encoding == PosEncoding::kAlibi) x += float(slopes[h]) * float(j - i_pos);
        if (spec.logits_soft_cap > 0) x = float(spec.logits_soft_cap) * std::tanh(x / float(spec.logits_soft_cap));
        s[j] = x;
        m = std::max(m, x);
      }
      if (m == -std::numeric_limits<float>::infinity()) continue;
      float sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t j = 0; j < kv; ++j) {
        if (!vis[std::size_t(i * kv + j)]) continue;
        const float w = std::exp(s[j] - m);
        sum += w;
        for (std::int64_t d = 0; d < dvo; ++d) acc[d] += w * operand(v[(j * hk + g) * dvo + d]);
      }
      for (std::int64_t d = 0; d < dvo; ++d) r.o[(i * hq + h) * dvo + d] = round_to(acc[d] / sum, o_dtype);
      r.lse[i * hq + h] = (double(m) + std::log(double(sum))) / std::log(2.0);
    }
  }
  return r;
}

struct Built {
  HostBuffer q, out, lse, k, v, kv_combined, mask;
  HostPageTable table;
  Tensor indices_device;
  PagedKVCache cache_host, cache_device;
  std::vector<std::vector<std::uint8_t>> masks;  // per request, bool
  std::vector<std::int32_t> qo_indptr, kv_indptr;
};

Built build(const AttentionCase& c, Device device, std::mt19937_64& rng) {
  Built b;
  const auto batch = std::int64_t(c.qo_lens.size());
  b.qo_indptr = {0};
  b.kv_indptr = {0};
  for (std::int64_t i = 0; i < batch; ++i) {
    b.qo_indptr.push_back(b.qo_indptr.back() + c.qo_lens[i]);
    b.kv_indptr.push_back(b.kv_indptr.back() + c.kv_lens[i]);
  }
  const std::int64_t nnz_q = b.qo_indptr.back(), nnz_kv = b.kv_indptr.back();
  const bool nhd = c.layout == KVLayout::kNHD;
  const std::int64_t hk = c.num_kv_heads;

  b.q.make({nnz_q, c.num_qo_heads, c.head_dim_qk}, c.q_dtype, stride_pad(3, c.strided));
  fill_normal(b.q.host, rng, c.q_std);
  b.out.make({nnz_q, c.num_qo_heads, c.head_dim_vo}, c.o_dtype, stride_pad(3, c.strided));
  if (c.with_lse) b.lse.make({nnz_q, c.num_qo_heads}, DType::kF32);

  if (c.wrapper == Wrapper::kRaggedPrefill) {
    if (nhd) {
      b.k.make({nnz_kv, hk, c.head_dim_qk}, c.kv_dtype, stride_pad(3, c.strided));
      b.v.make({nnz_kv, hk, c.head_dim_vo}, c.kv_dtype, stride_pad(3, c.strided));
    } else {
      b.k.make({hk, nnz_kv, c.head_dim_qk}, c.kv_dtype, stride_pad(3, c.strided));
      b.v.make({hk, nnz_kv, c.head_dim_vo}, c.kv_dtype, stride_pad(3, c.strided));
    }
    fill_normal(b.k.host, rng);
    fill_normal(b.v.host, rng);
  } else {
    b.table = random_page_table(c.kv_lens, c.page_size, 3, rng);
    const std::int64_t P = b.table.num_pages, ps = c.page_size, d = c.head_dim_qk;
    if (c.combined_cache) {
      if (nhd) b.kv_combined.make({P, 2, ps, hk, d}, c.kv_dtype, stride_pad(5, c.strided));
      else b.kv_combined.make({P, 2, hk, ps, d}, c.kv_dtype, stride_pad(5, c.strided));
      b.cache_host = PagedKVCache::combined(b.kv_combined.host, c.layout);
    } else {
      if (nhd) {
        b.k.make({P, ps, hk, d}, c.kv_dtype, stride_pad(4, c.strided));
        b.v.make({P, ps, hk, d}, c.kv_dtype, stride_pad(4, c.strided));
      } else {
        b.k.make({P, hk, ps, d}, c.kv_dtype, stride_pad(4, c.strided));
        b.v.make({P, hk, ps, d}, c.kv_dtype, stride_pad(4, c.strided));
      }
      b.cache_host = PagedKVCache::pair(b.k.host, b.v.host, c.layout);
    }
    // Only the slots of real tokens get values; the rest stay NaN.
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const auto* indptr = b.table.indptr.data_as<const std::int32_t>();
    const auto* ids = b.table.indices.data_as<const std::int32_t>();
    for (std::int64_t r = 0; r < batch; ++r) {
      for (std::int32_t j = 0; j < c.kv_lens[r]; ++j) {
        const std::int64_t page = ids[indptr[r] + j / ps], slot = j % ps;
        for (std::int64_t h = 0; h < hk; ++h) {
          for (const TensorView* t : {&b.cache_host.k, &b.cache_host.v}) {
            char* row = nhd ? element_at(*t, {page, slot, h, 0}) : element_at(*t, {page, h, slot, 0});
            for (std::int64_t e = 0; e < d; ++e) from_float(nd(rng), c.kv_dtype, row + e * std::int64_t(t->element_size()));
          }
        }
      }
    }
  }

  if (c.options.mask_mode == MaskMode::kCustom) {
    std::bernoulli_distribution keep(0.7);
    std::vector<std::uint8_t> flat;
    for (std::int64_t r = 0; r < batch; ++r) {
      std::vector<std::uint8_t> m(static_cast<std::size_t>(c.qo_lens[r]) * static_cast<std::size_t>(c.kv_lens[r]));
      for (auto& x : m) x = keep(rng) ? 1 : 0;
      b.masks.push_back(m);
      if (c.packed_mask) {
        for (std::size_t byte = 0; byte < (m.size() + 7) / 8; ++byte) {
          std::uint8_t v = 0;
          for (std::size_t bit = 0; bit < 8 && byte * 8 + bit < m.size(); ++bit) v |= std::uint8_t(m[byte * 8 + bit] << bit);
          flat.push_back(v);
        }
      } else {
        flat.insert(flat.end(), m.begin(), m.end());
      }
    }
    b.mask.make({std::int64_t(flat.size())}, c.packed_mask ? DType::kU8 : DType::kBool);
    if (!flat.empty()) std::memcpy(b.mask.host.data(), flat.data(), flat.size());
  }

  for (HostBuffer* buf : {&b.q, &b.out, &b.lse, &b.k, &b.v, &b.kv_combined, &b.mask}) {
    if (buf->host.defined()) buf->to_device(device);
  }
  if (c.wrapper != Wrapper::kRaggedPrefill) {
    if (c.combined_cache) b.cache_device = PagedKVCache::combined(b.kv_combined.device, c.layout);
    else b.cache_device = PagedKVCache::pair(b.k.device, b.v.device, c.layout);
    if (!device.is_cpu()) b.indices_device = b.table.indices.to(device);
  }
  return b;
}

// `args` (the problem's arrays) with what every plan takes from the case: heads, head
// dims (and page size), options, the custom mask (prefill), dtypes and split.
template <class Args>
Args with_case_fields(const AttentionCase& c, const TensorView& mask, Args args) {
  args.num_qo_heads = c.num_qo_heads;
  args.num_kv_heads = c.num_kv_heads;
  if constexpr (requires { args.head_dim_qk; }) {  // ragged
    args.head_dim_qk = c.head_dim_qk;
    args.head_dim_vo = c.head_dim_vo;
  } else {  // paged
    args.head_dim = c.head_dim_qk;
    args.page_size = c.page_size;
  }
  args.options = c.options;
  if constexpr (requires { args.custom_mask; }) args.custom_mask = mask;
  args.q_dtype = c.q_dtype;
  args.kv_dtype = c.kv_dtype;
  args.o_dtype = c.o_dtype;
  args.split = c.split;
  return args;
}

// What one wrapper call reads and writes: views of a Built's buffers (on the run's
// device) and the host lengths of the requests it runs.
struct CallViews {
  std::vector<std::int32_t> qo_indptr, kv_indptr;  // paged: kv_indptr in pages (PageTable's)
  TensorView q, out, lse, k, v, mask;
  PageTable table;
  PagedKVCache cache;
};

CallViews whole_batch(const AttentionCase& c, Device device, const Built& b) {
  CallViews v{b.qo_indptr, b.kv_indptr, b.q.device, b.out.device, b.lse.device, b.k.device, b.v.device,
              b.mask.device, {}, b.cache_device};
  if (c.wrapper != Wrapper::kRaggedPrefill) {
    v.kv_indptr = to_vector_i32(b.table.indptr);
    v.table = b.table.view();
    if (!device.is_cpu()) v.table.indices = b.indices_device;
  }
  return v;
}

// Requests [first, last) of the batch as a batch of their own: the same inputs, sliced.
CallViews some_requests(const AttentionCase& c, Device device, const Built& b, std::int64_t first,
                        std::int64_t last) {
  CallViews v = whole_batch(c, device, b);
  const auto rebase = [&](const std::vector<std::int32_t>& indptr) {
    std::vector<std::int32_t> out;
    for (std::int64_t i = first; i <= last; ++i) out.push_back(indptr[std::size_t(i)] - indptr[std::size_t(first)]);
    return out;
  };
  const std::int64_t q0 = b.qo_indptr[std::size_t(first)], q1 = b.qo_indptr[std::size_t(last)];
  v.qo_indptr = rebase(b.qo_indptr);
  v.q = v.q.slice(0, q0, q1);
  v.out = v.out.slice(0, q0, q1);
  if (v.lse.defined()) v.lse = v.lse.slice(0, q0, q1);
  if (c.wrapper == Wrapper::kRaggedPrefill) {
    const int dim = c.layout == KVLayout::kNHD ? 0 : 1;
    const std::int64_t k0 = b.kv_indptr[std::size_t(first)], k1 = b.kv_indptr[std::size_t(last)];
    v.kv_indptr = rebase(b.kv_indptr);
    v.k = v.k.slice(dim, k0, k1);
    v.v = v.v.slice(dim, k0, k1);
  } else {
    const std::vector<std::int32_t> pages = to_vector_i32(b.table.indptr);
    v.kv_indptr = rebase(pages);
    v.table.indptr = TensorView();  // set by run_wrapper from kv_indptr
    v.table.indices = v.table.indices.slice(0, pages[std::size_t(first)], pages[std::size_t(last)]);
    v.table.last_page_len = v.table.last_page_len.slice(0, first, last);
  }
  if (v.mask.defined()) {  // each request's mask on its own (packed: whole bytes each)
    std::int64_t m0 = 0, m1 = 0;
    for (std::int64_t r = 0; r < last; ++r) {
      const std::int64_t n = std::int64_t(c.qo_lens[std::size_t(r)]) * c.kv_lens[std::size_t(r)];
      const std::int64_t len = c.packed_mask ? (n + 7) / 8 : n;
      if (r < first) m0 += len;
      m1 += len;
    }
    v.mask = v.mask.slice(0, m0, m1);
  }
  return v;
}

void run_call(const AttentionCase& c, Device device, const CallViews& in) {
  const Tensor qo_indptr = int32_tensor(in.qo_indptr), kv_indptr = int32_tensor(in.kv_indptr);
  RunOptions run{.lse = in.lse, .k_scale = c.k_scale, .v_scale = c.v_scale};
  PageTable table = in.table;
  if (c.wrapper != Wrapper::kRaggedPrefill) table.indptr = kv_indptr;
  // The wrapper planned with the case's fields over `args` (its arrays), then run on
  // q, `kv` (the cache, or k and v) and out.
  const auto plan_and_run = [&](auto&& w, const auto& args, const auto&... kv) {
    w.plan(with_case_fields(c, in.mask, args));
    w.run(in.q, kv..., in.out, run);
  };
  switch (c.wrapper) {
    case Wrapper::kRaggedPrefill:
      plan_and_run(BatchPrefillWithRaggedKVCache(device, c.layout),
                   RaggedPrefillPlanArgs{.qo_indptr = qo_indptr, .kv_indptr = kv_indptr}, in.k, in.v);
      break;
    case Wrapper::kPagedPrefill:
      plan_and_run(BatchPrefillWithPagedKVCache(device, c.layout),
                   PagedPrefillPlanArgs{.qo_indptr = qo_indptr, .page_table = table}, in.cache);
      break;
    case Wrapper::kDecode:
      plan_and_run(BatchDecodeWithPagedKVCache(device, c.layout), DecodePlanArgs{.page_table = table}, in.cache);
      break;
  }
}

void run_wrapper(const AttentionCase& c, Device device, Built& b) {
  run_call(c, device, whole_batch(c, device, b));
  b.out.to_host();
  b.lse.to_host();
}

// Dense double copies of request r's q [qo, Hq, Dqk], k [kv, Hk, Dqk], v [kv, Hk, Dvo]
// (k and v multiplied by their scales).
struct Dense {
  std::vector<double> q, k, v;
};
Dense gather(const AttentionCase& c, const Built& b, std::int64_t r) {
  Dense d;
  const bool nhd = c.layout == KVLayout::kNHD;
  const std::int64_t hq = c.num_qo_heads, hk = c.num_kv_heads;
  for (std::int64_t i = b.qo_indptr[r]; i < b.qo_indptr[r + 1]; ++i)
    for (std::int64_t h = 0; h < hq; ++h)
      for (std::int64_t e = 0; e < c.head_dim_qk; ++e) d.q.push_back(to_double(element_at(b.q.host, {i, h, e}), c.q_dtype));
  for (std::int32_t j = 0; j < c.kv_lens[r]; ++j) {
    for (std::int64_t h = 0; h < hk; ++h) {
      const char *krow, *vrow;
      if (c.wrapper == Wrapper::kRaggedPrefill) {
        const std::int64_t t = b.kv_indptr[r] + j;
        krow = nhd ? element_at(b.k.host, {t, h, 0}) : element_at(b.k.host, {h, t, 0});
        vrow = nhd ? element_at(b.v.host, {t, h, 0}) : element_at(b.v.host, {h, t, 0});
      } else {
        const auto* indptr = b.table.indptr.data_as<const std::int32_t>();
        const std::int64_t page = b.table.indices.data_as<const std::int32_t>()[indptr[r] + j / c.page_size];
        const std::int64_t slot = j % c.page_size;
        krow = nhd ? element_at(b.cache_host.k, {page, slot, h, 0}) : element_at(b.cache_host.k, {page, h, slot, 0});
        vrow = nhd ? element_at(b.cache_host.v, {page, slot, h, 0}) : element_at(b.cache_host.v, {page, h, slot, 0});
      }
      const auto es = std::int64_t(dtype_size(c.kv_dtype));
      for (std::int64_t e = 0; e < c.head_dim_qk; ++e) d.k.push_back(to_double(krow + e * es, c.kv_dtype) * c.k_scale);
      for (std::int64_t e = 0; e < c.head_dim_vo; ++e) d.v.push_back(to_double(vrow + e * es, c.kv_dtype) * c.v_scale);
    }
  }
  return d;
}

}  // namespace

std::string AttentionCase::describe() const {
  std::string lens;
  for (std::size_t i = 0; i < qo_lens.size() && i < 4; ++i) lens += fmt::format("{}x{} ", qo_lens[i], kv_lens[i]);
  if (qo_lens.size() > 4) lens += "...";
  static constexpr const char* kWrapper[] = {"ragged", "paged", "decode"};
  static constexpr const char* kMask[] = {"none", "causal", "custom"};
  return fmt::format(
      "{} [{}] B={} ({}) Hq={} Hk={} D={}/{} page={} {} {}{} mask={}{} win={} cap={} pos={} q={} kv={} o={} lse={} "
      "split={}{}{}",
      name, kWrapper[int(wrapper)], qo_lens.size(), lens, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo,
      page_size, kv_layout_name(layout), combined_cache ? "5-D" : "pair", strided ? " strided" : "",
      kMask[int(options.mask_mode)], packed_mask ? "(packed)" : "", options.window_left, options.logits_soft_cap,
      pos_encoding_name(options.pos_encoding), dtype_name(q_dtype), dtype_name(kv_dtype), dtype_name(o_dtype),
      with_lse, split.fixed_split_size, split.disable_split_kv ? " nosplit" : "",
      q_std != 1.0f ? fmt::format(" q_std={}", q_std) : std::string());
}

std::string CaseReport::summary() const {
  return fmt::format("o: err {:.3g} (naive {:.3g}, tol {:.3g}); lse: err {:.3g} (naive {:.3g}, tol {:.3g}){}{}",
                     max_err_o, max_naive_err_o, tol_o, max_err_lse, max_naive_err_lse, tol_lse,
                     nan_found ? "; NaN in output" : "", inf_lse_mismatch ? "; -inf LSE / zero row mismatch" : "");
}

double attention_atol(DType q_dtype, DType kv_dtype, DType o_dtype) {
  if (is_fp8(kv_dtype)) return 2e-2;
  if (q_dtype == DType::kBF16 || kv_dtype == DType::kBF16 || o_dtype == DType::kBF16) return 4e-3;
  return 1e-3;
}

CaseOutput run_attention_case_raw(const AttentionCase& c, Device device) {
  const Built b = built_and_run(c, device, build, run_wrapper);
  return read_case_output(b.out.host, b.lse.host, b.qo_indptr.back(), c.num_qo_heads, c.head_dim_vo, c.o_dtype,
                          c.with_lse);
}

std::vector<CaseOutput> run_attention_case_requests(const AttentionCase& c, Device device,
                                                    std::span<const RequestRange> ranges) {
  std::mt19937_64 rng(c.seed);
  Built b = build(c, device, rng);
  std::vector<CaseOutput> outs;
  for (const RequestRange& range : ranges) {
    run_call(c, device, some_requests(c, device, b, range.first, range.last));
    b.out.to_host();
    b.lse.to_host();
    const std::int64_t q0 = b.qo_indptr[std::size_t(range.first)], q1 = b.qo_indptr[std::size_t(range.last)];
    outs.push_back(read_case_output(b.out.host.slice(0, q0, q1),
                                    c.with_lse ? b.lse.host.slice(0, q0, q1) : TensorView(), q1 - q0,
                                    c.num_qo_heads, c.head_dim_vo, c.o_dtype, c.with_lse));
  }
  return outs;
}

CaseOutput read_case_output(const TensorView& o, const TensorView& lse, std::int64_t nnz_q, std::int64_t heads,
                            std::int64_t dim, DType o_dtype, bool with_lse) {
  CaseOutput out;
  for (std::int64_t i = 0; i < nnz_q; ++i)
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t e = 0; e < dim; ++e) out.o.push_back(float(to_double(element_at(o, {i, h, e}), o_dtype)));
      if (with_lse) out.lse.push_back(*reinterpret_cast<const float*>(element_at(lse, {i, h})));
    }
  return out;
}

CaseReport run_attention_case(const AttentionCase& c, Device device) {
  const Built b = built_and_run(c, device, build, run_wrapper);

  CaseReport rep;
  const auto batch = std::int64_t(c.qo_lens.size());
  const std::int64_t hq = c.num_qo_heads, dvo = c.head_dim_vo;
  std::vector<double> kernel_o, oracle_o, naive_o, kernel_lse, oracle_lse, naive_lse;
  for (std::int64_t r = 0; r < batch; ++r) {
    const Dense d = gather(c, b, r);
    oracle::AttentionSpec spec =
        oracle::spec_from_options(c.options, c.qo_lens[r], c.kv_lens[r], hq, c.num_kv_heads, c.head_dim_qk, dvo);
    if (c.options.mask_mode == MaskMode::kCustom) spec.custom_mask = b.masks[r];
    const oracle::AttentionResult ref = oracle::attention(spec, d.q, d.k, d.v);
    const bool mixed = !is_fp8(c.kv_dtype) && c.kv_dtype != c.q_dtype;
    const std::optional<DType> operands = mixed ? std::optional(DType::kBF16) : std::nullopt;
    const DType rotated = mixed ? DType::kBF16 : c.q_dtype;
    const oracle::AttentionResult naive =
        naive_f32(spec, d.q, d.k, d.v, c.o_dtype, rotated, is_fp8(c.kv_dtype) || mixed ? rotated : c.kv_dtype,
                  operands);
    for (std::int64_t i = 0; i < c.qo_lens[r]; ++i) {
      const std::int64_t row = b.qo_indptr[r] + i;
      for (std::int64_t h = 0; h < hq; ++h) {
        const double ref_lse = ref.lse[i * hq + h];
        bool nonzero = false;
        for (std::int64_t e = 0; e < dvo; ++e) {
          const double got = to_double(element_at(b.out.host, {row, h, e}), c.o_dtype);
          if (std::isnan(got)) rep.nan_found = true;
          nonzero |= got != 0.0;
          const std::size_t k = std::size_t((i * hq + h) * dvo + e);
          rep.max_err_o = std::max(rep.max_err_o, std::abs(got - ref.o[k]));
          rep.max_naive_err_o = std::max(rep.max_naive_err_o, std::abs(naive.o[k] - ref.o[k]));
        }
        // A row that sees no key must be exactly zero with LSE -inf.
        if (ref_lse == kNegInf && nonzero) rep.inf_lse_mismatch = true;
        if (c.with_lse) {
          const double got = *reinterpret_cast<const float*>(element_at(b.lse.host, {row, h}));
          if (std::isnan(got)) rep.nan_found = true;
          if ((got == kNegInf) != (ref_lse == kNegInf)) {
            rep.inf_lse_mismatch = true;
          } else if (ref_lse != kNegInf) {
            rep.max_err_lse = std::max(rep.max_err_lse, std::abs(got - ref_lse));
            rep.max_naive_err_lse = std::max(rep.max_naive_err_lse, std::abs(naive.lse[i * hq + h] - ref_lse));
          }
        }
      }
    }
  }
  const double atol = attention_atol(c.q_dtype, c.kv_dtype, c.o_dtype);
  rep.tol_o = 2 * rep.max_naive_err_o + atol;
  rep.tol_lse = 2 * rep.max_naive_err_lse + atol;
  return rep;
}

}  // namespace kvinfer::testing
