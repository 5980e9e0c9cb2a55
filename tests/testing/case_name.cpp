// SPDX-License-Identifier: Apache-2.0
#include "testing/case_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>

namespace kvinfer::testing {
namespace {

const char* short_dtype(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kE4M3: return "e4m3";
    case DType::kE5M2: return "e5m2";
    default: return "other";
  }
}

// A number as name characters: 0.5 -> 0p5, -1 -> m1.
std::string number(double v) {
  std::string s = fmt::format("{:g}", v);
  std::replace(s.begin(), s.end(), '.', 'p');
  std::replace(s.begin(), s.end(), '-', 'm');
  std::replace(s.begin(), s.end(), '+', 'p');
  return s;
}

template <class Lens>
std::int32_t longest(const Lens& lens) {
  return lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
}

// kv dtype, with the query dtype after it where it differs (fp8 caches).
std::string dtypes(DType q, DType kv, DType o) {
  std::string s = short_dtype(kv);
  if (q != kv) s += std::string("_q") + short_dtype(q);
  if (o != q) s += std::string("_o") + short_dtype(o);
  return s;
}

std::string split(const SplitOptions& s) {
  if (s.disable_split_kv) return "_nosplit";
  if (s.fixed_split_size > 0) return "_split" + std::to_string(s.fixed_split_size);
  return "";
}

// FNV-1a: stable across runs and platforms.
std::string hash_suffix(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return fmt::format("_{:06x}", h & 0xFFFFFFu);
}

template <class Case>
void name_all(std::vector<Case>& cases) {
  for (Case& c : cases)
    if (c.name.empty()) c.name = case_name(c);
  std::map<std::string, int> count;
  for (const Case& c : cases) ++count[c.name];
  for (Case& c : cases) {
    if (count[c.name] < 2) continue;
    Case unnamed = c;
    unnamed.name.clear();
    c.name += hash_suffix(unnamed.describe() + "/" + std::to_string(c.seed));
  }
  count.clear();
  for (const Case& c : cases)
    if (++count[c.name] > 1) throw std::logic_error("two test cases named " + c.name);
}

}  // namespace

std::string case_name(const AttentionCase& c) {
  static constexpr const char* kWrapper[] = {"ragged", "paged", "decode"};
  static constexpr const char* kMask[] = {"", "_causal", "_custom"};
  static constexpr const char* kPos[] = {"", "_rope", "_alibi"};
  const AttentionOptions& o = c.options;
  std::string s = fmt::format("{}_{}_hd{}", kWrapper[int(c.wrapper)], dtypes(c.q_dtype, c.kv_dtype, c.o_dtype),
                              c.head_dim_qk);
  if (c.head_dim_vo != c.head_dim_qk) s += "x" + std::to_string(c.head_dim_vo);
  const std::int64_t group = c.num_kv_heads > 0 ? c.num_qo_heads / c.num_kv_heads : 0;
  s += fmt::format("_g{}_kvh{}", group, c.num_kv_heads);
  if (c.wrapper != Wrapper::kRaggedPrefill) s += fmt::format("_ps{}{}", c.page_size, c.combined_cache ? "" : "_pair");
  s += c.layout == KVLayout::kHND ? "_hnd" : "_nhd";
  s += kMask[int(o.mask_mode)];
  if (c.packed_mask) s += "_packed";
  if (o.window_left >= 0) s += "_win" + std::to_string(o.window_left);
  if (o.logits_soft_cap > 0) s += "_cap" + number(o.logits_soft_cap);
  s += kPos[int(o.pos_encoding)];
  if (c.strided) s += "_strided";
  if (!c.with_lse) s += "_nolse";
  s += fmt::format("_b{}_kv{}", c.qo_lens.size(), longest(c.kv_lens));
  if (c.wrapper != Wrapper::kDecode) s += "_qo" + std::to_string(longest(c.qo_lens));
  s += split(c.split);
  if (o.backend == PrefillBackend::kHopper) s += "_fa3";
  if (o.backend == PrefillBackend::kPortable) s += "_portable";
  return s;
}

std::string case_name(const MLACase& c) {
  std::string s = fmt::format("mla_{}_h{}_kpe{}_ps{}{}", dtypes(c.q_dtype, c.kv_dtype, c.o_dtype), c.num_heads,
                              c.head_dim_kpe, c.page_size, c.combined_cache ? "" : "_pair");
  if (c.causal) s += "_causal";
  if (c.strided) s += "_strided";
  if (c.shared_pages) s += "_shared";
  if (!c.with_lse) s += "_nolse";
  else if (c.lse_base_e) s += "_lse_e";
  if (c.ckv_scale != 1.0f || c.kpe_scale != 1.0f) s += "_scale" + number(c.ckv_scale) + "_" + number(c.kpe_scale);
  if (c.sm_scale != 0.0f) s += "_sm" + number(c.sm_scale);
  s += fmt::format("_b{}_qo{}_kv{}", c.qo_lens.size(), longest(c.qo_lens), longest(c.kv_lens));
  s += split(c.split);
  return s;
}

void name_cases(std::vector<AttentionCase>& cases) { name_all(cases); }
void name_cases(std::vector<MLACase>& cases) { name_all(cases); }

}  // namespace kvinfer::testing
