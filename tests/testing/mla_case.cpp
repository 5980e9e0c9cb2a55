// SPDX-License-Identifier: Apache-2.0
#include "testing/mla_case.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "oracle/oracle.hpp"
#include "testing/case_name.hpp"
#include "testing/host_buffer.hpp"
#include "testing/pairwise.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr std::int64_t kDc = kMlaHeadDimCkv;
constexpr std::int32_t kIndicesPadding = 5;  // kv_indices entries past kv_indptr[batch_size]: never read
constexpr std::int32_t kBadPageId = -7;

float effective_sm_scale(const MLACase& c) {
  return c.sm_scale > 0 ? c.sm_scale : 1.0f / std::sqrt(192.0f);
}

struct Built {
  HostBuffer q_cat, q_nope, q_pe, out, lse, cache, ckv, kpe;
  TensorView q_nope_host, q_pe_host, q_nope_dev, q_pe_dev;
  MLACache cache_host, cache_dev;
  std::vector<std::int32_t> qo_indptr, kv_indptr, kv_indices;
  Tensor indices_device;
};

Built build(const MLACase& c, Device device, std::mt19937_64& rng) {
  Built b;
  const auto batch = std::int64_t(c.qo_lens.size());
  const std::int64_t H = c.num_heads, dp = c.head_dim_kpe, ps = c.page_size;
  b.qo_indptr = {0};
  for (std::int64_t i = 0; i < batch; ++i) b.qo_indptr.push_back(b.qo_indptr.back() + c.qo_lens[i]);
  const std::int64_t nnz_q = b.qo_indptr.back();

  // Queries: two tensors, or two views of one (FlashInfer callers split one q).
  if (c.strided) {
    b.q_cat.make({nnz_q, H, kDc + dp}, c.q_dtype, {1, 1, 8});
    fill_normal(b.q_cat.host, rng);
  } else {
    b.q_nope.make({nnz_q, H, kDc}, c.q_dtype);
    fill_normal(b.q_nope.host, rng);
    if (dp > 0) {
      b.q_pe.make({nnz_q, H, dp}, c.q_dtype);
      fill_normal(b.q_pe.host, rng);
    }
  }
  if (c.strided)
    b.out.make({nnz_q, H, kDc}, c.o_dtype, {1, 2, 8});
  else
    b.out.make({nnz_q, H, kDc}, c.o_dtype);
  if (c.with_lse) b.lse.make({nnz_q, H}, DType::kF32);

  // Page table (shuffled; optionally shared pages) with padding past the used entries.
  const HostPageTable table = random_page_table(c.kv_lens, ps, 3, rng);
  b.kv_indptr = to_vector_i32(table.indptr);
  b.kv_indices = to_vector_i32(table.indices);
  if (c.shared_pages && batch > 1 && b.kv_indptr[1] > 0) {
    const std::int32_t first = b.kv_indptr[1];
    for (std::int64_t r = 1; r < batch; ++r)
      for (std::int32_t k = b.kv_indptr[r]; k < b.kv_indptr[r + 1]; ++k)
        b.kv_indices[k] = b.kv_indices[(k - b.kv_indptr[r]) % first];
  }
  b.kv_indices.insert(b.kv_indices.end(), kIndicesPadding, kBadPageId);

  const std::int64_t P = table.num_pages;
  if (c.combined_cache) {
    b.cache.make({P, ps, kDc + dp}, c.kv_dtype);
    b.cache_host = MLACache::combined(b.cache.host, kDc);
  } else {
    b.ckv.make({P, ps, kDc}, c.kv_dtype, {1, 2, 16});
    if (dp > 0) b.kpe.make({P, ps, dp}, c.kv_dtype, {0, 1, 0});
    b.cache_host = MLACache::pair(b.ckv.host, b.kpe.host);
  }
  // Only the slots of real tokens get values; the rest stay NaN. With shared pages
  // a later request overwrites an earlier one's slot, which gather() then reads.
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (std::int64_t r = 0; r < batch; ++r) {
    for (std::int32_t j = 0; j < c.kv_lens[r]; ++j) {
      const std::int64_t page = b.kv_indices[b.kv_indptr[r] + j / ps], slot = j % ps;
      char* crow = element_at(b.cache_host.ckv, {page, slot, 0});
      for (std::int64_t e = 0; e < kDc; ++e)
        from_float(nd(rng), c.kv_dtype, crow + e * std::int64_t(dtype_size(c.kv_dtype)));
      if (dp == 0) continue;
      char* prow = element_at(b.cache_host.kpe, {page, slot, 0});
      for (std::int64_t e = 0; e < dp; ++e)
        from_float(nd(rng), c.kv_dtype, prow + e * std::int64_t(dtype_size(c.kv_dtype)));
    }
  }

  for (HostBuffer* buf : {&b.q_cat, &b.q_nope, &b.q_pe, &b.out, &b.lse, &b.cache, &b.ckv, &b.kpe}) {
    if (buf->host.defined()) buf->to_device(device);
  }
  if (c.strided) {
    b.q_nope_host = b.q_cat.host.slice(2, 0, kDc);
    b.q_nope_dev = b.q_cat.device.slice(2, 0, kDc);
    if (dp > 0) {
      b.q_pe_host = b.q_cat.host.slice(2, kDc, kDc + dp);
      b.q_pe_dev = b.q_cat.device.slice(2, kDc, kDc + dp);
    }
  } else {
    b.q_nope_host = b.q_nope.host;
    b.q_nope_dev = b.q_nope.device;
    b.q_pe_host = b.q_pe.host;
    b.q_pe_dev = b.q_pe.device;
  }
  b.cache_dev =
      c.combined_cache ? MLACache::combined(b.cache.device, kDc) : MLACache::pair(b.ckv.device, b.kpe.device);
  if (!device.is_cpu()) b.indices_device = int32_tensor(b.kv_indices).to(device);
  return b;
}

void run_wrapper(const MLACase& c, Device device, Built& b) {
  const Tensor qo_indptr = int32_tensor(b.qo_indptr), kv_indptr = int32_tensor(b.kv_indptr);
  const Tensor kv_len = int32_tensor(c.kv_lens);
  const Tensor indices_host = int32_tensor(b.kv_indices);
  BatchMLAPagedAttention w(device);
  w.plan({.qo_indptr = qo_indptr,
          .kv_indptr = kv_indptr,
          .kv_indices = device.is_cpu() ? indices_host.view() : b.indices_device.view(),
          .kv_len = kv_len,
          .num_heads = c.num_heads,
          .head_dim_ckv = kDc,
          .head_dim_kpe = c.head_dim_kpe,
          .page_size = c.page_size,
          .causal = c.causal,
          .sm_scale = effective_sm_scale(c),
          .q_dtype = c.q_dtype,
          .kv_dtype = c.kv_dtype,
          .o_dtype = c.o_dtype,
          .split = c.split});
  w.run(
      b.q_nope_dev, b.q_pe_dev, b.cache_dev, b.out.device,
      {.lse = b.lse.device, .lse_base_e = c.lse_base_e, .ckv_scale = c.ckv_scale, .kpe_scale = c.kpe_scale});
  b.out.to_host();
  b.lse.to_host();
}

// Dense double copies of request r: q_nope [qo, H, 512], q_pe [qo, H, kpe],
// ckv [kv, 512] * ckv_scale, kpe [kv, kpe] * kpe_scale.
struct Dense {
  std::vector<double> q_nope, q_pe, ckv, kpe;
};
Dense gather(const MLACase& c, const Built& b, std::int64_t r) {
  Dense d;
  const std::int64_t H = c.num_heads, dp = c.head_dim_kpe;
  for (std::int64_t i = b.qo_indptr[r]; i < b.qo_indptr[r + 1]; ++i)
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t e = 0; e < kDc; ++e)
        d.q_nope.push_back(to_double(element_at(b.q_nope_host, {i, h, e}), c.q_dtype));
      for (std::int64_t e = 0; e < dp; ++e)
        d.q_pe.push_back(to_double(element_at(b.q_pe_host, {i, h, e}), c.q_dtype));
    }
  for (std::int32_t j = 0; j < c.kv_lens[r]; ++j) {
    const std::int64_t page = b.kv_indices[b.kv_indptr[r] + j / c.page_size], slot = j % c.page_size;
    for (std::int64_t e = 0; e < kDc; ++e)
      d.ckv.push_back(to_double(element_at(b.cache_host.ckv, {page, slot, e}), c.kv_dtype) * c.ckv_scale);
    for (std::int64_t e = 0; e < dp; ++e)
      d.kpe.push_back(to_double(element_at(b.cache_host.kpe, {page, slot, e}), c.kv_dtype) * c.kpe_scale);
  }
  return d;
}

}  // namespace

oracle::AttentionResult mla_naive_f32(const oracle::MLASpec& spec, std::span<const double> q_nope,
                                      std::span<const double> q_pe, std::span<const double> ckv_d,
                                      std::span<const double> kpe_d, DType o_dtype,
                                      std::optional<DType> operands) {
  const auto operand = [&](double x) { return operands ? round_to(float(x), *operands) : float(x); };
  const std::int64_t qo = spec.qo_len, kv = spec.kv_len, H = spec.num_heads, dc = spec.head_dim_ckv;
  const std::int64_t dp = spec.head_dim_kpe;
  const auto scale = float(spec.sm_scale);
  oracle::AttentionResult r;
  r.o.assign(std::size_t(qo * H * dc), 0.0);
  r.lse.assign(std::size_t(qo * H), kNegInf);
  std::vector<float> ckv, kpe;
  for (double x : ckv_d) ckv.push_back(operand(x));
  for (double x : kpe_d) kpe.push_back(operand(x));
  std::vector<float> s(static_cast<std::size_t>(kv)), acc(static_cast<std::size_t>(dc));
  for (std::int64_t i = 0; i < qo; ++i) {
    const std::int64_t last = spec.causal ? std::min(kv, i + kv - qo + 1) : kv;  // keys [0, last)
    if (last <= 0) continue;
    for (std::int64_t h = 0; h < H; ++h) {
      float m = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j < last; ++j) {
        float dot = 0;
        for (std::int64_t e = 0; e < dc; ++e) dot += operand(q_nope[(i * H + h) * dc + e]) * ckv[j * dc + e];
        for (std::int64_t e = 0; e < dp; ++e) dot += operand(q_pe[(i * H + h) * dp + e]) * kpe[j * dp + e];
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      float sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t j = 0; j < last; ++j) {
        const float w = std::exp(s[j] - m);
        sum += w;
        for (std::int64_t e = 0; e < dc; ++e) acc[e] += w * ckv[j * dc + e];
      }
      for (std::int64_t e = 0; e < dc; ++e) r.o[(i * H + h) * dc + e] = round_to(acc[e] / sum, o_dtype);
      r.lse[i * H + h] = (double(m) + std::log(double(sum))) / std::log(2.0);
    }
  }
  return r;
}

void compare_request(CaseReport& rep, std::span<const double> o, std::span<const double> lse,
                     const oracle::AttentionResult& ref, const oracle::AttentionResult& naive,
                     double lse_factor) {
  const std::size_t rows = ref.lse.size();
  const std::size_t dim = rows == 0 ? 0 : ref.o.size() / rows;
  for (std::size_t r = 0; r < rows; ++r) {
    bool nonzero = false;
    for (std::size_t e = 0; e < dim; ++e) {
      const std::size_t k = r * dim + e;
      if (std::isnan(o[k])) rep.nan_found = true;
      nonzero |= o[k] != 0.0;
      rep.max_err_o = std::max(rep.max_err_o, std::abs(o[k] - ref.o[k]));
      rep.max_naive_err_o = std::max(rep.max_naive_err_o, std::abs(naive.o[k] - ref.o[k]));
    }
    if (ref.lse[r] == kNegInf && nonzero) rep.inf_lse_mismatch = true;  // a row without keys is exactly 0
    if (lse.empty()) continue;
    if (std::isnan(lse[r])) rep.nan_found = true;
    if ((lse[r] == kNegInf) != (ref.lse[r] == kNegInf)) {
      rep.inf_lse_mismatch = true;
    } else if (ref.lse[r] != kNegInf) {
      rep.max_err_lse = std::max(rep.max_err_lse, std::abs(lse[r] - ref.lse[r] * lse_factor));
      rep.max_naive_err_lse =
          std::max(rep.max_naive_err_lse, std::abs((naive.lse[r] - ref.lse[r]) * lse_factor));
    }
  }
}

void finish_report(CaseReport& rep, double atol) {
  rep.tol_o = 2 * rep.max_naive_err_o + atol;
  rep.tol_lse = 2 * rep.max_naive_err_lse + atol;
}

std::string MLACase::describe() const {
  std::string lens;
  for (std::size_t i = 0; i < qo_lens.size() && i < 4; ++i)
    lens += fmt::format("{}x{} ", qo_lens[i], kv_lens[i]);
  if (qo_lens.size() > 4) lens += "...";
  return fmt::format(
      "{} [mla] B={} ({}) H={} kpe={} page={} {}{}{}{} q={} kv={} o={} lse={}{} scales={}/{} sm_scale={} "
      "split={}{}",
      name, qo_lens.size(), lens, num_heads, head_dim_kpe, page_size, causal ? "causal " : "",
      combined_cache ? "combined" : "pair", strided ? " strided" : "", shared_pages ? " shared" : "",
      dtype_name(q_dtype), dtype_name(kv_dtype), dtype_name(o_dtype), with_lse, lse_base_e ? "(base e)" : "",
      ckv_scale, kpe_scale, sm_scale, split.fixed_split_size, split.disable_split_kv ? " nosplit" : "");
}

double MLACase::cost() const {
  double n = 0;
  for (std::size_t b = 0; b < qo_lens.size(); ++b) n += double(qo_lens[b]) * kv_lens[b];
  return n * double(num_heads) * double(2 * kDc + head_dim_kpe);
}

CaseOutput run_mla_case_raw(const MLACase& c, Device device) {
  const Built b = built_and_run(c, device, build, run_wrapper);
  return read_case_output(b.out.host, b.lse.host, b.qo_indptr.back(), c.num_heads, kDc, c.o_dtype, c.with_lse);
}

CaseReport run_mla_case(const MLACase& c, Device device) {
  const Built b = built_and_run(c, device, build, run_wrapper);

  CaseReport rep;
  const auto batch = std::int64_t(c.qo_lens.size());
  const std::int64_t H = c.num_heads;
  // The LSE is compared in the base the wrapper was asked for.
  const double lse_factor = c.lse_base_e ? std::log(2.0) : 1.0;
  for (std::int64_t r = 0; r < batch; ++r) {
    const Dense d = gather(c, b, r);
    const oracle::MLASpec spec{.qo_len = c.qo_lens[r],
                               .kv_len = c.kv_lens[r],
                               .num_heads = H,
                               .head_dim_ckv = kDc,
                               .head_dim_kpe = c.head_dim_kpe,
                               .causal = c.causal,
                               .sm_scale = double(effective_sm_scale(c))};
    const oracle::AttentionResult ref = oracle::mla_attention(spec, d.q_nope, d.q_pe, d.ckv, d.kpe);
    const bool mixed = !is_fp8(c.kv_dtype) && c.kv_dtype != c.q_dtype;
    const oracle::AttentionResult naive = mla_naive_f32(spec, d.q_nope, d.q_pe, d.ckv, d.kpe, c.o_dtype,
                                                        mixed ? std::optional(DType::kBF16) : std::nullopt);
    std::vector<double> o, lse;
    for (std::int64_t i = b.qo_indptr[r]; i < b.qo_indptr[r + 1]; ++i)
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t e = 0; e < kDc; ++e) o.push_back(to_double(element_at(b.out.host, {i, h, e}), c.o_dtype));
        if (c.with_lse) lse.push_back(*reinterpret_cast<const float*>(element_at(b.lse.host, {i, h})));
      }
    compare_request(rep, o, lse, ref, naive, lse_factor);
  }
  finish_report(rep, attention_atol(c.q_dtype, c.kv_dtype, c.o_dtype));
  return rep;
}

// ---------------------------------------------------------------- case lists
namespace {

enum Axis {
  kBatch,
  kKvLen,
  kQoLen,
  kHeads,
  kPage,
  kCausal,
  kKpe,
  kStorage,
  kStrided,
  kDtypes,
  kLse,
  kSplit,
  kNumAxes
};
const std::array<std::vector<int>, kNumAxes> kValues = {{
    {1, 3, 7},                        // batch (0 is a named edge case)
    {0, 17, 97, 514, 2048},           // kv_len
    {1, 3, 5, 7, 9, 11, 13, 15, 17},  // qo_len
    {16, 64, 128},                    // num_heads
    {1, 16, 64},                      // page_size
    {0, 1},                           // causal
    {64, 0},                          // head_dim_kpe
    {0, 1},                           // combined [P, page, 576] / separate ckv, kpe
    {0, 1},                           // q, out strided
    {0, 1, 2, 3},                     // q/kv: bf16/bf16, f16/f16, bf16/e4m3, f16/e5m2
    {0, 1, 2},                        // lse: none, base 2, base e
    {-1, 0, 64, 300},                 // split: automatic, disabled, fixed sizes
}};
using Choice = std::array<int, kNumAxes>;

MLACase make_case(const Choice& ch, std::uint64_t seed) {
  auto val = [&](Axis a) { return kValues[a][std::size_t(ch[a])]; };
  MLACase c;
  const int batch = val(kBatch), kv = val(kKvLen), qo = val(kQoLen);
  // Lengths vary a little across the batch so that requests differ.
  for (int b = 0; b < batch; ++b) {
    c.qo_lens.push_back(std::max(1, qo - 2 * (b % 3)));
    c.kv_lens.push_back(std::max(0, kv - (b * 7) % std::max(1, kv / 3 + 1)));
  }
  c.num_heads = val(kHeads);
  c.page_size = val(kPage);
  c.causal = val(kCausal) == 1;
  c.head_dim_kpe = val(kKpe);
  c.combined_cache = val(kStorage) == 0;
  c.strided = val(kStrided) == 1;
  static constexpr DType kQ[] = {DType::kBF16, DType::kF16, DType::kBF16, DType::kF16};
  static constexpr DType kKv[] = {DType::kBF16, DType::kF16, DType::kE4M3, DType::kE5M2};
  c.q_dtype = c.o_dtype = kQ[val(kDtypes)];
  c.kv_dtype = kKv[val(kDtypes)];
  if (is_fp8(c.kv_dtype)) {
    c.ckv_scale = 0.5f;
    c.kpe_scale = 2.0f;
  }
  c.with_lse = val(kLse) > 0;
  c.lse_base_e = val(kLse) == 2;
  const int split = val(kSplit);
  c.split.disable_split_kv = split == 0;
  c.split.fixed_split_size = split > 0 ? split : -1;
  c.seed = seed;
  return c;
}


}  // namespace

std::vector<MLACase> mla_case_list() {
  // The oracle is O(qo * kv * H * 1088) per request: the budget per case keeps the
  // list at about ten seconds on one core. The pairs that only fit above it (2048
  // keys with 128 heads, with 7 requests or with more than 3 query rows) are
  // covered by the slow grid.
  std::vector<MLACase> cases =
      pairwise_cases(kValues, {.seed = 20261201, .candidates = 80, .max_cost = 1.5e8, .prefer_cheaper = true}, 3000,
                     make_case, [](const MLACase& c) { return c.cost(); });

  // Named edge cases.
  auto base = [](std::string name) {
    MLACase c;
    c.name = std::move(name);
    c.num_heads = 16;
    return c;
  };
  {
    MLACase c = base("empty_requests");
    c.qo_lens = {3, 0, 5, 4, 0};
    c.kv_lens = {0, 9, 17, 0, 0};
    c.causal = true;
    cases.push_back(c);
  }
  {
    MLACase c = base("batch0");
    cases.push_back(c);
  }
  {
    MLACase c = base("qo_gt_kv_causal");  // the first rows see no key: zeros, LSE -inf
    c.qo_lens = {17};
    c.kv_lens = {5};
    c.causal = true;
    c.page_size = 1;
    c.split.fixed_split_size = 2;
    cases.push_back(c);
  }
  {
    MLACase c = base("split_kv_empty_chunks");  // causal chunks that some rows cannot see
    c.qo_lens = {17, 2};
    c.kv_lens = {97, 130};
    c.causal = true;
    c.split.fixed_split_size = 16;
    c.lse_base_e = true;
    cases.push_back(c);
  }
  {
    MLACase c = base("page5_shared_pages");
    c.qo_lens = {3, 1, 2};
    c.kv_lens = {41, 23, 41};
    c.page_size = 5;
    c.shared_pages = true;
    c.combined_cache = false;
    c.strided = true;
    c.split.fixed_split_size = 10;
    cases.push_back(c);
  }
  {
    MLACase c = base("sharp_softmax");  // logits of std ~24: exp2 must not overflow
    c.qo_lens = {4, 1};
    c.kv_lens = {70, 300};
    c.sm_scale = 1.0f;
    c.q_dtype = c.kv_dtype = c.o_dtype = DType::kF16;
    cases.push_back(c);
  }
  {
    MLACase c = base("fp8_e4m3_scales_o_f16");
    c.qo_lens = {2, 5};
    c.kv_lens = {33, 200};
    c.kv_dtype = DType::kE4M3;
    c.o_dtype = DType::kF16;
    c.ckv_scale = 0.25f;
    c.kpe_scale = 3.0f;
    c.causal = true;
    c.split.fixed_split_size = 48;
    cases.push_back(c);
  }
  {
    MLACase c = base("nope_only_decode_heads128");
    c.qo_lens = {1, 1, 1, 1};
    c.kv_lens = {514, 1, 0, 64};
    c.num_heads = 128;
    c.head_dim_kpe = 0;
    c.page_size = 64;
    c.lse_base_e = true;
    cases.push_back(c);
  }
  name_cases(cases);
  return cases;
}

std::vector<MLACase> wide_mla_case_list(int count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<MLACase> cases;
  // First the pairs the CI list cannot afford: long KV with many heads, many
  // requests and long query runs, each with splits.
  {
    MLACase c;
    c.qo_lens = {17};
    c.kv_lens = {2048};
    c.num_heads = 128;
    c.page_size = 64;
    c.causal = true;
    c.split.fixed_split_size = 300;
    c.name = "wide_long_heads128";
    cases.push_back(c);
    c.qo_lens = {5, 3, 1, 5, 3, 1, 5};
    c.kv_lens = {2048, 2041, 2034, 2027, 2020, 2013, 2006};
    c.num_heads = 16;
    c.page_size = 16;
    c.causal = false;
    c.kv_dtype = DType::kE4M3;
    c.ckv_scale = 0.5f;
    c.kpe_scale = 2.0f;
    c.split.fixed_split_size = -1;
    c.lse_base_e = true;
    c.name = "wide_batch7_long_fp8";
    cases.push_back(c);
    c = MLACase{};
    c.qo_lens = {17, 15, 13};
    c.kv_lens = {514, 1, 2048};
    c.num_heads = 64;
    c.page_size = 1;
    c.causal = true;
    c.head_dim_kpe = 0;
    c.combined_cache = false;
    c.strided = true;
    c.q_dtype = c.kv_dtype = c.o_dtype = DType::kF16;
    c.name = "wide_qo17_page1_nope";
    cases.push_back(c);
  }
  add_random_cases(cases, count, kValues, rng, make_case, [](const MLACase& c) { return c.cost(); }, 2e9);
  name_cases(cases);
  return cases;
}

}  // namespace kvinfer::testing
