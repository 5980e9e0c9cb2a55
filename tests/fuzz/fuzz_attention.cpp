// SPDX-License-Identifier: Apache-2.0
// plan() of every wrapper (paged decode, paged prefill, ragged prefill, MLA, cascade)
// from fuzzed arguments, then run() on small CPU tensors, then a second plan() and
// run() on the same wrapper (a re-plan, which must not leave a half-updated plan).
// The arrays and tensors the harness passes are sized exactly, so any read or write
// outside them is an ASan report; a kvinfer::Error is a rejected input.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "fuzz_input.hpp"
#include "kvinfer/kvinfer.hpp"

namespace kvinfer::fuzz {
namespace {

constexpr DType kFloatTypes[] = {DType::kF16, DType::kBF16, DType::kE4M3, DType::kE5M2, DType::kF32};

DType float_type(Input& in) {
  if (in.in<int>(0, 31) == 0) return DType(in.in<int>(0, 255));
  return kFloatTypes[in.in<std::size_t>(0, std::size(kFloatTypes) - 1)];
}

// The problem as the tensors are shaped; the plan arguments start from it and may
// then be perturbed.
struct Shape2 {
  std::int64_t hq = 1, hk = 1, d = 16, page_size = 4;
};

Shape2 shape_of(Input& in) {
  Shape2 s;
  s.hk = in.in<std::int64_t>(1, 2);
  s.hq = s.hk * in.in<std::int64_t>(1, 3);
  static constexpr std::int64_t kDims[] = {8, 16, 32, 64, 128, 256};
  s.d = kDims[in.in<std::size_t>(0, std::size(kDims) - 1)];
  s.page_size = std::int64_t(1) << in.in<int>(0, 4);
  return s;
}

AttentionOptions options_of(Input& in, std::int64_t hq) {
  AttentionOptions o;
  o.mask_mode = in.enumerator<MaskMode>(3);
  if (in.flag()) o.window_left = in.count32(-2, 40);
  if (in.flag()) o.logits_soft_cap = in.real(-1.0f, 60.0f);
  if (in.flag()) o.sm_scale = in.real(-4.0f, 4.0f);
  o.pos_encoding = in.enumerator<PosEncoding>(3);
  if (in.flag()) o.rope_scale = in.real(-2.0f, 8.0f);
  if (in.flag()) o.rope_theta = in.real(-1.0f, 1.0e6f);
  if (in.flag()) {
    // As many slopes as heads (hq may be a huge perturbed value: at most 16 here).
    const std::int64_t n = in.flag() ? std::clamp<std::int64_t>(hq, 0, 16) : in.in<std::int64_t>(0, 9);
    for (std::int64_t i = 0; i < n; ++i) o.alibi_slopes.push_back(in.real(-1.0f, 1.0f));
  }
  o.backend = in.enumerator<PrefillBackend>(3);
  return o;
}

SplitOptions split_of(Input& in) {
  SplitOptions s;
  if (in.flag()) s.fixed_split_size = in.count(-2, 64);
  s.disable_split_kv = in.flag();
  return s;
}

std::optional<Capacity> capacity_of(Input& in) {
  if (in.in<int>(0, 3) != 0) return std::nullopt;
  return Capacity{in.count(0, 8), in.count(0, 64), in.count(0, 64)};
}

// A page table for `kv_lens`, with page ids drawn from [0, num_pages) and now and
// then a bad entry in any of its arrays.
struct Pages {
  std::vector<std::int32_t> indptr, indices, last;
  Tensor t_indptr, t_indices, t_last;
  PageTable table() const { return {t_indptr, t_indices, t_last}; }
};

Pages pages_of(Input& in, const std::vector<std::int32_t>& kv_lens, std::int64_t page_size,
               std::int64_t num_pages) {
  Pages p;
  p.indptr.push_back(0);
  for (std::int32_t len : kv_lens) {
    const std::int32_t n = std::int32_t((len + page_size - 1) / page_size);
    for (std::int32_t i = 0; i < n; ++i) p.indices.push_back(in.in<std::int32_t>(0, std::int32_t(num_pages - 1)));
    p.indptr.push_back(p.indptr.back() + n);
    p.last.push_back(n == 0 ? 0 : std::int32_t(len - (n - 1) * page_size));
  }
  // Spare entries past the last request's pages: allowed (indices has >= indptr[-1]).
  if (in.flag()) p.indices.push_back(in.in<std::int32_t>(0, std::int32_t(num_pages - 1)));
  in.maybe_corrupt(p.indptr);
  in.maybe_corrupt(p.indices);
  in.maybe_corrupt(p.last);
  if (in.in<int>(0, 15) == 0 && !p.indices.empty()) p.indices.pop_back();
  p.t_indptr = int32_tensor(p.indptr);
  p.t_indices = int32_tensor(p.indices);
  p.t_last = int32_tensor(p.last);
  return p;
}

// A paged cache of `num_pages` pages, combined or as a K/V pair, in either layout;
// now and then V has a page fewer than K (which the checks must see).
struct Cache {
  Tensor kv, k, v;
  PagedKVCache cache;
};

Cache cache_of(Input& in, KVLayout layout, std::int64_t num_pages, const Shape2& s, DType dtype) {
  Cache c;
  const bool nhd = layout == KVLayout::kNHD;
  const std::int64_t a = nhd ? s.page_size : s.hk, b = nhd ? s.hk : s.page_size;
  if (in.flag()) {
    c.kv = filled({num_pages, 2, a, b, s.d}, dtype, in.seed());
    c.cache = PagedKVCache::combined(c.kv, layout);
  } else {
    const std::int64_t v_pages = in.in<int>(0, 15) == 0 ? std::max<std::int64_t>(num_pages - 1, 0) : num_pages;
    c.k = filled({num_pages, a, b, s.d}, dtype, in.seed());
    c.v = filled({v_pages, a, b, s.d}, dtype, in.seed());
    c.cache = PagedKVCache::pair(c.k, c.v, layout);
  }
  return c;
}

RunOptions run_options_of(Input& in, std::int64_t nnz_q, std::int64_t hq, Tensor& lse) {
  RunOptions r;
  if (in.flag()) {
    lse = Tensor::empty({nnz_q + (in.in<int>(0, 15) == 0 ? 1 : 0), hq}, DType::kF32);
    r.lse = lse;
  }
  if (in.flag()) r.k_scale = in.real(-2.0f, 2.0f);
  if (in.flag()) r.v_scale = in.real(-2.0f, 2.0f);
  if (in.flag()) r.enable_pdl = in.flag();
  return r;
}

// Perturbs the head counts and dims handed to plan() away from the tensors' shapes.
void perturb(Input& in, std::int64_t& hq, std::int64_t& hk, std::int64_t& d, std::int64_t& page_size) {
  if (in.in<int>(0, 7) != 0) return;
  switch (in.in<int>(0, 3)) {
    case 0: hq = in.count(0, 8); break;
    case 1: hk = in.count(0, 4); break;
    case 2: d = in.count(0, 300); break;
    default: page_size = in.count(0, 32); break;
  }
}

template <class Wrapper, class Args, class Run>
void plan_run_twice(Wrapper& w, Input& in, const Args& first, const Args& second, Run&& run) {
  bool planned = false;
  try {
    w.plan(first);
    planned = true;
  } catch (const Error&) {
  }
  if (planned || in.flag()) {
    try {
      run();
    } catch (const Error&) {
    }
  }
  w.plan(second);
  run();
}

void decode_or_paged_prefill(Input& in, bool prefill) {
  const Shape2 s = shape_of(in);
  const int batch = in.in<int>(0, 4);
  const std::vector<std::int32_t> kv_lens = in.lengths(batch, 40);
  std::vector<std::int32_t> qo_lens(std::size_t(batch), 1);
  if (prefill) qo_lens = in.lengths(batch, 6);
  std::int64_t total_pages = 0;
  for (std::int32_t len : kv_lens) total_pages += (len + s.page_size - 1) / s.page_size;
  const std::int64_t num_pages = std::max<std::int64_t>(1, total_pages + in.in<int>(-1, 2));
  const KVLayout layout = in.flag() ? KVLayout::kNHD : KVLayout::kHND;
  const DType q_dtype = float_type(in), kv_dtype = float_type(in), o_dtype = float_type(in);
  Cache cache = cache_of(in, layout, num_pages, s, in.flag() ? kv_dtype : DType::kBF16);
  std::int64_t nnz_q = 0;
  for (std::int32_t n : qo_lens) nnz_q += n;
  Tensor q = filled({nnz_q, s.hq, s.d}, in.flag() ? q_dtype : DType::kBF16, in.seed());
  Tensor out = Tensor::empty({nnz_q, s.hq, s.d}, in.flag() ? o_dtype : DType::kBF16);
  Tensor lse;
  const RunOptions run_options = run_options_of(in, nnz_q, s.hq, lse);

  auto make_pages = [&] { return pages_of(in, kv_lens, s.page_size, num_pages); };
  Pages p1 = make_pages(), p2 = make_pages();
  std::vector<std::int32_t> qo_indptr = indptr_of(qo_lens);
  in.maybe_corrupt(qo_indptr);
  const Tensor t_qo = int32_tensor(qo_indptr);

  auto args_of = [&](const Pages& p) {
    std::int64_t hq = s.hq, hk = s.hk, d = s.d, ps = s.page_size;
    perturb(in, hq, hk, d, ps);
    AttentionOptions o = options_of(in, hq);
    const SplitOptions split = split_of(in);
    if (prefill) {
      PagedPrefillPlanArgs a{.qo_indptr = t_qo, .page_table = p.table(), .num_qo_heads = hq, .num_kv_heads = hk,
                             .head_dim = d, .page_size = ps, .options = o, .q_dtype = q_dtype,
                             .kv_dtype = kv_dtype, .o_dtype = o_dtype, .split = split};
      return std::optional<PagedPrefillPlanArgs>(a);
    }
    (void)t_qo;
    return std::optional<PagedPrefillPlanArgs>(PagedPrefillPlanArgs{
        .page_table = p.table(), .num_qo_heads = hq, .num_kv_heads = hk, .head_dim = d, .page_size = ps,
        .options = o, .q_dtype = q_dtype, .kv_dtype = kv_dtype, .o_dtype = o_dtype, .split = split});
  };
  const PagedPrefillPlanArgs a1 = *args_of(p1), a2 = *args_of(p2);
  const std::optional<Capacity> capacity = capacity_of(in);
  if (prefill) {
    BatchPrefillWithPagedKVCache w(Device::cpu(), layout, capacity);
    plan_run_twice(w, in, a1, a2, [&] { w.run(q, cache.cache, out, run_options); });
  } else {
    auto to_decode = [](const PagedPrefillPlanArgs& a) {
      return DecodePlanArgs{.page_table = a.page_table, .num_qo_heads = a.num_qo_heads,
                            .num_kv_heads = a.num_kv_heads, .head_dim = a.head_dim, .page_size = a.page_size,
                            .options = a.options, .q_dtype = a.q_dtype, .kv_dtype = a.kv_dtype,
                            .o_dtype = a.o_dtype, .split = a.split};
    };
    BatchDecodeWithPagedKVCache w(Device::cpu(), layout, capacity);
    plan_run_twice(w, in, to_decode(a1), to_decode(a2), [&] { w.run(q, cache.cache, out, run_options); });
  }
}

void ragged_prefill(Input& in) {
  const Shape2 s = shape_of(in);
  const int batch = in.in<int>(0, 4);
  const std::vector<std::int32_t> qo_lens = in.lengths(batch, 6), kv_lens = in.lengths(batch, 40);
  std::int64_t nnz_q = 0, nnz_kv = 0;
  for (int i = 0; i < batch; ++i) nnz_q += qo_lens[std::size_t(i)], nnz_kv += kv_lens[std::size_t(i)];
  const std::int64_t dvo = in.flag() ? s.d : std::int64_t(8) << in.in<int>(0, 4);
  const KVLayout layout = in.flag() ? KVLayout::kNHD : KVLayout::kHND;
  const DType q_dtype = float_type(in), kv_dtype = float_type(in), o_dtype = float_type(in);
  const bool nhd = layout == KVLayout::kNHD;
  Tensor q = filled({nnz_q, s.hq, s.d}, in.flag() ? q_dtype : DType::kBF16, in.seed());
  const DType kvt = in.flag() ? kv_dtype : DType::kBF16;
  Tensor k = filled({nhd ? nnz_kv : s.hk, nhd ? s.hk : nnz_kv, s.d}, kvt, in.seed());
  Tensor v = filled({nhd ? nnz_kv : s.hk, nhd ? s.hk : nnz_kv, dvo}, kvt, in.seed());
  Tensor out = Tensor::empty({nnz_q, s.hq, dvo}, in.flag() ? o_dtype : DType::kBF16);
  Tensor lse;
  const RunOptions run_options = run_options_of(in, nnz_q, s.hq, lse);

  std::vector<std::int32_t> qo_indptr = indptr_of(qo_lens), kv_indptr = indptr_of(kv_lens);
  in.maybe_corrupt(qo_indptr);
  in.maybe_corrupt(kv_indptr);
  const Tensor t_qo = int32_tensor(qo_indptr), t_kv = int32_tensor(kv_indptr);
  // A custom mask of about the right length: bool, or packed (uint8, little bit order).
  std::int64_t mask_len = 0;
  for (int i = 0; i < batch; ++i) mask_len += std::int64_t(qo_lens[std::size_t(i)]) * kv_lens[std::size_t(i)];
  Tensor mask;
  if (in.flag()) {
    const bool packed = in.flag();
    const std::int64_t n = (packed ? (mask_len + 7) / 8 : mask_len) + in.in<int>(-1, 1);
    mask = filled({std::max<std::int64_t>(n, 0)}, packed ? DType::kU8 : DType::kBool, in.seed());
    if (!packed) {
      auto* b = mask.data_as<std::uint8_t>();
      for (std::int64_t i = 0; i < mask.numel(); ++i) b[i] &= 1;
    }
  }
  // Position offsets of about one per request, small or at the int32 edges.
  Tensor offsets;
  if (in.flag()) {
    std::vector<std::int32_t> o(std::size_t(std::max(0, batch + in.in<int>(-1, 1))));
    for (auto& x : o) x = in.count32(-60, 60);
    offsets = int32_tensor(o);
  }
  auto args_of = [&] {
    std::int64_t hq = s.hq, hk = s.hk, d = s.d, ps = 0;
    perturb(in, hq, hk, d, ps);
    return RaggedPrefillPlanArgs{.qo_indptr = t_qo, .kv_indptr = t_kv, .num_qo_heads = hq, .num_kv_heads = hk,
                                 .head_dim_qk = d, .head_dim_vo = in.flag() ? dvo : in.count(0, 300),
                                 .options = options_of(in, hq), .custom_mask = in.flag() ? mask : Tensor(),
                                 .position_offsets = in.flag() ? offsets : Tensor(),
                                 .q_dtype = q_dtype, .kv_dtype = kv_dtype, .o_dtype = o_dtype,
                                 .split = split_of(in)};
  };
  const RaggedPrefillPlanArgs a1 = args_of(), a2 = args_of();
  BatchPrefillWithRaggedKVCache w(Device::cpu(), layout, capacity_of(in));
  plan_run_twice(w, in, a1, a2, [&] { w.run(q, k, v, out, run_options); });
}

void mla(Input& in) {
  const std::int64_t heads = in.in<std::int64_t>(1, 4);
  const std::int64_t dc = in.flag() ? kMlaHeadDimCkv : 16 << in.in<int>(0, 5);
  const std::int64_t dk = in.flag() ? kMlaHeadDimKpe : (in.flag() ? 0 : 16);
  const std::int64_t page_size = std::int64_t(1) << in.in<int>(0, 4);
  const int batch = in.in<int>(0, 3);
  const std::vector<std::int32_t> qo_lens = in.lengths(batch, 4), kv_lens = in.lengths(batch, 40);
  std::int64_t nnz_q = 0;
  for (std::int32_t n : qo_lens) nnz_q += n;
  std::vector<std::int32_t> kv_pages;
  std::int64_t total_pages = 0;
  for (std::int32_t len : kv_lens) {
    kv_pages.push_back(std::int32_t((len + page_size - 1) / page_size));
    total_pages += kv_pages.back();
  }
  const std::int64_t num_pages = std::max<std::int64_t>(1, total_pages + in.in<int>(-1, 1));
  const DType q_dtype = in.flag() ? DType::kBF16 : float_type(in);
  const DType kv_dtype = in.flag() ? DType::kBF16 : float_type(in);
  Tensor ckv = filled({num_pages, page_size, dc}, kv_dtype, in.seed());
  Tensor kpe = filled({num_pages, page_size, std::max<std::int64_t>(dk, 1)}, kv_dtype, in.seed());
  const MLACache cache = dk > 0 ? MLACache::pair(ckv, kpe) : MLACache{ckv, {}};
  Tensor q_nope = filled({nnz_q, heads, dc}, q_dtype, in.seed());
  Tensor q_pe = filled({nnz_q, heads, std::max<std::int64_t>(dk, 1)}, q_dtype, in.seed());
  Tensor out = Tensor::empty({nnz_q, heads, dc}, in.flag() ? q_dtype : float_type(in));
  MLARunOptions run_options;
  Tensor lse;
  if (in.flag()) {
    lse = Tensor::empty({nnz_q, heads}, DType::kF32);
    run_options.lse = lse;
    run_options.lse_base_e = in.flag();
  }
  if (in.flag()) run_options.ckv_scale = in.real(-2.0f, 2.0f);
  if (in.flag()) run_options.kpe_scale = in.real(-2.0f, 2.0f);

  std::vector<std::int32_t> qo_indptr = indptr_of(qo_lens), kv_indptr = indptr_of(kv_pages), indices;
  for (std::int64_t i = 0; i < total_pages + in.in<int>(0, 1); ++i)
    indices.push_back(in.in<std::int32_t>(0, std::int32_t(num_pages - 1)));
  std::vector<std::int32_t> lens = kv_lens;
  in.maybe_corrupt(qo_indptr);
  in.maybe_corrupt(kv_indptr);
  in.maybe_corrupt(indices);
  in.maybe_corrupt(lens);
  const Tensor t_qo = int32_tensor(qo_indptr), t_kv = int32_tensor(kv_indptr), t_idx = int32_tensor(indices),
               t_len = int32_tensor(lens);
  auto args_of = [&] {
    MLAPlanArgs a{.qo_indptr = t_qo, .kv_indptr = t_kv, .kv_indices = t_idx, .kv_len = t_len,
                  .num_heads = heads, .head_dim_ckv = dc, .head_dim_kpe = dk, .page_size = page_size,
                  .causal = in.flag(), .q_dtype = q_dtype, .kv_dtype = kv_dtype, .split = split_of(in)};
    if (in.flag()) a.sm_scale = in.real(-1.0f, 1.0f);
    if (in.flag()) a.o_dtype = float_type(in);
    if (in.in<int>(0, 7) == 0) {
      switch (in.in<int>(0, 3)) {
        case 0: a.num_heads = in.count(0, 8); break;
        case 1: a.head_dim_ckv = in.count(0, 600); break;
        case 2: a.head_dim_kpe = in.count(0, 80); break;
        default: a.page_size = in.count(0, 32); break;
      }
    }
    return a;
  };
  const MLAPlanArgs a1 = args_of(), a2 = args_of();
  BatchMLAPagedAttention w(Device::cpu(), capacity_of(in));
  const TensorView pe = dk > 0 ? q_pe.view() : TensorView();
  plan_run_twice(w, in, a1, a2, [&] { w.run(q_nope, pe, cache, out, run_options); });
}

void cascade(Input& in) {
  const Shape2 s = shape_of(in);
  const int num_levels = in.in<int>(1, 3);
  const std::int32_t nnz_q = in.in<std::int32_t>(0, 6);
  const KVLayout layout = in.flag() ? KVLayout::kNHD : KVLayout::kHND;
  // Each level splits the query rows into subtrees; deeper levels are finer.
  struct Level {
    std::vector<std::int32_t> qo_indptr;
    Tensor t_qo;
    Pages pages;
  };
  std::vector<std::vector<std::int32_t>> kv_lens(static_cast<std::size_t>(num_levels));
  std::vector<std::vector<std::int32_t>> qo_indptrs;
  std::int64_t total_pages = 0;
  for (int l = 0; l < num_levels; ++l) {
    std::vector<std::int32_t> qo{0};
    while (qo.back() < nnz_q && qo.size() < 8) qo.push_back(std::min(nnz_q, qo.back() + in.in<std::int32_t>(1, 4)));
    if (qo.back() != nnz_q) qo.push_back(nnz_q);
    if (qo.size() == 1 && in.flag()) qo.push_back(nnz_q);
    kv_lens[std::size_t(l)] = in.lengths(int(qo.size()) - 1, 24);
    for (std::int32_t len : kv_lens[std::size_t(l)]) total_pages += (len + s.page_size - 1) / s.page_size;
    in.maybe_corrupt(qo);
    qo_indptrs.push_back(qo);
  }
  const std::int64_t num_pages = std::max<std::int64_t>(1, total_pages + in.in<int>(-1, 1));
  std::vector<Level> levels(static_cast<std::size_t>(num_levels));
  for (int l = 0; l < num_levels; ++l) {
    levels[std::size_t(l)].qo_indptr = qo_indptrs[std::size_t(l)];
    levels[std::size_t(l)].t_qo = int32_tensor(qo_indptrs[std::size_t(l)]);
    levels[std::size_t(l)].pages = pages_of(in, kv_lens[std::size_t(l)], s.page_size, num_pages);
  }
  const DType q_dtype = float_type(in), kv_dtype = float_type(in), o_dtype = float_type(in);
  Cache cache = cache_of(in, layout, num_pages, s, in.flag() ? kv_dtype : DType::kBF16);
  Tensor q = filled({nnz_q, s.hq, s.d}, in.flag() ? q_dtype : DType::kBF16, in.seed());
  Tensor out = Tensor::empty({nnz_q, s.hq, s.d}, in.flag() ? o_dtype : DType::kBF16);
  Tensor lse;
  const RunOptions run_options = run_options_of(in, nnz_q, s.hq, lse);
  auto args_of = [&] {
    CascadePlanArgs a;
    const int n = in.in<int>(0, 15) == 0 ? in.in<int>(0, 4) : num_levels;
    for (int l = 0; l < n; ++l) {
      const Level& lv = levels[std::size_t(l % num_levels)];
      a.levels.push_back({lv.t_qo, lv.pages.table()});
    }
    std::int64_t hq = s.hq, hk = s.hk, d = s.d, ps = s.page_size;
    perturb(in, hq, hk, d, ps);
    a.num_qo_heads = hq, a.num_kv_heads = hk, a.head_dim = d, a.page_size = ps;
    a.options = options_of(in, hq);
    a.q_dtype = q_dtype, a.kv_dtype = kv_dtype, a.o_dtype = o_dtype;
    a.split = split_of(in);
    return a;
  };
  const CascadePlanArgs a1 = args_of(), a2 = args_of();
  std::vector<Capacity> capacities;
  if (in.in<int>(0, 3) == 0) {
    const int n = in.in<int>(0, num_levels + 1);
    for (int l = 0; l < n; ++l) capacities.push_back(Capacity{in.count(0, 8), in.count(0, 64), in.count(0, 64)});
  }
  MultiLevelCascadeAttention w(num_levels, Device::cpu(), layout, capacities);
  plan_run_twice(w, in, a1, a2, [&] { w.run(q, cache.cache, out, run_options); });
}

}  // namespace
}  // namespace kvinfer::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvinfer::fuzz;
  return run_one_of(data, size,
                    {[](Input& in) { decode_or_paged_prefill(in, false); },
                     [](Input& in) { decode_or_paged_prefill(in, true); }, ragged_prefill, mla, cascade});
}
