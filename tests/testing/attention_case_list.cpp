// SPDX-License-Identifier: Apache-2.0
// The attention case list: a pairwise-covering grid over the parameters of the
// CPU attention issue (every pair of parameter values appears in some case), kept
// cheap enough for CI, plus named edge cases; and a wider random grid.
#include <algorithm>
#include <array>
#include <random>

#include "testing/attention_case.hpp"
#include "testing/case_name.hpp"
#include "testing/pairwise.hpp"

namespace kvinfer::testing {
namespace {

// Parameter axes and their values.
enum Axis {
  kBatch, kKvLen, kQoLen, kPage, kKvHeads, kGroup, kHeadDim, kLayout, kStorage, kMask,
  kWindow, kSoftCap, kPos, kKvDtype, kLse, kWrapperAxis, kStrided, kNumAxes
};
const std::array<std::vector<int>, kNumAxes> kValues = {{
    {1, 3, 12, 17},               // batch (0 is a named edge case)
    {0, 1, 54, 97, 512, 2048},    // kv_len
    {1, 17, 37, 127},             // qo_len
    {1, 5, 16},                   // page_size
    {1, 4},                       // num_kv_heads
    {1, 4, 5, 8},                 // group size
    {64, 128, 256},               // head_dim
    {0, 1},                       // NHD, HND
    {0, 1},                       // 5-D, pair
    {0, 1, 2, 3},                 // mask none, causal, custom, custom packed
    {-1, 13},                     // window_left
    {0, 30},                      // soft cap
    {0, 1, 2},                    // none, rope, alibi
    {0, 1, 2, 3},                 // kv f16, bf16, e4m3, e5m2
    {0, 1},                       // lse
    {0, 1, 2},                    // ragged, paged, decode
    {0, 1},                       // strided
}};

using Choice = std::array<int, kNumAxes>;  // index into kValues per axis

AttentionCase make_case(const Choice& ch, std::uint64_t seed) {
  auto val = [&](Axis a) { return kValues[a][std::size_t(ch[a])]; };
  AttentionCase c;
  c.wrapper = Wrapper(val(kWrapperAxis));
  const int batch = val(kBatch), kv = val(kKvLen), qo = c.wrapper == Wrapper::kDecode ? 1 : val(kQoLen);
  // Lengths vary a little across the batch so that requests differ.
  for (int b = 0; b < batch; ++b) {
    c.qo_lens.push_back(qo == 1 ? 1 : qo - (b % 3));
    c.kv_lens.push_back(std::max(0, kv - (b * 7) % std::max(1, kv / 3 + 1)));
  }
  c.page_size = val(kPage);
  c.num_kv_heads = val(kKvHeads);
  c.num_qo_heads = c.num_kv_heads * val(kGroup);
  c.head_dim_qk = c.head_dim_vo = val(kHeadDim);
  c.layout = val(kLayout) == 0 ? KVLayout::kNHD : KVLayout::kHND;
  c.combined_cache = val(kStorage) == 0;
  const int mask = c.wrapper == Wrapper::kDecode ? 0 : val(kMask);
  c.options.mask_mode = mask == 0 ? MaskMode::kNone : mask == 1 ? MaskMode::kCausal : MaskMode::kCustom;
  c.packed_mask = mask == 3;
  c.options.window_left = val(kWindow);
  c.options.logits_soft_cap = float(val(kSoftCap));
  c.options.pos_encoding = PosEncoding(val(kPos));
  static constexpr DType kKv[] = {DType::kF16, DType::kBF16, DType::kE4M3, DType::kE5M2};
  c.kv_dtype = kKv[val(kKvDtype)];
  c.q_dtype = c.o_dtype = c.kv_dtype == DType::kBF16 || (is_fp8(c.kv_dtype) && seed % 2) ? DType::kBF16 : DType::kF16;
  if (seed % 3 == 1) c.o_dtype = other_half_dtype(c.q_dtype);  // the output's dtype is the caller's choice
  if (is_fp8(c.kv_dtype)) {
    c.k_scale = 0.5f;
    c.v_scale = 2.0f;
  }
  c.with_lse = val(kLse) == 1;
  c.strided = val(kStrided) == 1;
  c.seed = seed;
  return c;
}

// Multiply-adds of the oracle for a case: keeps CI cases cheap.
double cost(const AttentionCase& c) {
  double n = 0;
  for (std::size_t b = 0; b < c.qo_lens.size(); ++b) n += double(c.qo_lens[b]) * c.kv_lens[b];
  return n * double(c.num_qo_heads) * double(c.head_dim_qk + c.head_dim_vo);
}


}  // namespace

std::vector<AttentionCase> attention_case_list() {
  std::vector<AttentionCase> cases =
      pairwise_cases(kValues, {.seed = 20261130, .candidates = 60, .max_cost = 3e7, .prefer_cheaper = false}, 1000,
                     make_case, [](const AttentionCase& c) { return cost(c); });

  // Named edge cases, each of 8 query heads over 2 KV heads of head_dim 64 unless
  // `tweak` says otherwise.
  const auto add = [&](std::string name, Wrapper w, std::vector<std::int32_t> qo_lens,
                       std::vector<std::int32_t> kv_lens, auto&& tweak) {
    AttentionCase c;
    c.name = std::move(name);
    c.wrapper = w;
    c.num_qo_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim_qk = c.head_dim_vo = 64;
    c.qo_lens = std::move(qo_lens);
    c.kv_lens = std::move(kv_lens);
    tweak(c);
    cases.push_back(c);
  };
  const auto causal = [](AttentionCase& c) { c.options.mask_mode = MaskMode::kCausal; };
  add("empty_requests", Wrapper::kPagedPrefill, {3, 0, 5, 4, 0}, {0, 9, 17, 0, 0}, causal);
  add("empty_requests_decode", Wrapper::kDecode, {1, 1, 1}, {0, 9, 0},
      [](AttentionCase& c) { c.layout = KVLayout::kHND; });
  // bf16 queries far beyond fp16's range (|q| up to ~1e6) on fp8 KV: the GPU's fp8
  // decode tile runs its mma in fp16 and scales such queries by an exact power of
  // two. A small k_scale brings the logits back to a few units, so that the
  // softmax spreads over many keys (a one-hot softmax would hide errors in O).
  add("fp8_bf16_queries_beyond_fp16", Wrapper::kDecode, {1, 1, 1}, {700, 33, 2000}, [](AttentionCase& c) {
    c.num_qo_heads = 32;
    c.num_kv_heads = 8;
    c.head_dim_qk = c.head_dim_vo = 128;
    c.q_dtype = c.o_dtype = DType::kBF16;
    c.kv_dtype = DType::kE4M3;
    c.k_scale = 2e-5f;
    c.v_scale = 1.25f;
    c.q_std = 2e5f;
  });
  add("batch0", Wrapper::kRaggedPrefill, {}, {}, [](AttentionCase&) {});
  add("qo_gt_kv_causal", Wrapper::kRaggedPrefill, {34}, {1}, causal);
  add("split_kv_empty_chunks", Wrapper::kPagedPrefill, {2, 40}, {129, 300}, [&](AttentionCase& c) {
    causal(c);
    c.options.window_left = 20;
    c.split.fixed_split_size = 16;
  });
  add("split_kv_decode", Wrapper::kDecode, {1, 1, 1, 1}, {1000, 1, 333, 0}, [](AttentionCase& c) {
    c.page_size = 5;
    c.split.fixed_split_size = 64;
  });
  // A contiguous cache: one page per request (K and V apart, HND: [pages, Hk, L, D]).
  // The automatic split cuts such pages mid-page.
  add("contiguous_pages_auto_split", Wrapper::kDecode, {1, 1, 1}, {9000, 4096, 100}, [](AttentionCase& c) {
    c.page_size = 9000;
    c.layout = KVLayout::kHND;
    c.combined_cache = false;
  });
  add("gqa_5_page1", Wrapper::kPagedPrefill, {7, 3}, {20, 31}, [&](AttentionCase& c) {
    causal(c);
    c.num_qo_heads = 10;
    c.page_size = 1;
    c.strided = true;
    c.combined_cache = false;
  });
  // Paged prefill of 128-row tiles whose key tiles are whole TMA boxes of pages on sm_90
  // (pages of 8-256 slots): a window that starts a request's keys mid-page, split
  // chunks, padded strides, both layouts and cache forms, every head dim.
  add("tma_pages_64_window_split", Wrapper::kPagedPrefill, {150, 40}, {700, 300}, [&](AttentionCase& c) {
    causal(c);
    c.head_dim_qk = c.head_dim_vo = 128;
    c.q_dtype = c.kv_dtype = c.o_dtype = DType::kBF16;
    c.page_size = 64;
    c.layout = KVLayout::kHND;
    c.combined_cache = false;
    c.strided = true;
    c.options.window_left = 100;
    c.split.fixed_split_size = 128;
  });
  add("tma_pages_256_d256", Wrapper::kPagedPrefill, {70, 33}, {1000, 33}, [&](AttentionCase& c) {
    causal(c);
    c.head_dim_qk = c.head_dim_vo = 256;
    c.page_size = 256;
    c.options.window_left = 37;
  });
  add("tma_pages_8_d64", Wrapper::kPagedPrefill, {130, 17}, {131, 200}, [&](AttentionCase& c) {
    c.page_size = 8;
    c.q_dtype = c.kv_dtype = c.o_dtype = DType::kBF16;
  });
  add("head_dim_192_128", Wrapper::kRaggedPrefill, {17, 9}, {33, 9}, [&](AttentionCase& c) {
    causal(c);
    c.head_dim_qk = 192;
    c.head_dim_vo = 128;
    c.q_dtype = c.kv_dtype = c.o_dtype = DType::kBF16;
  });
  add("fp8_ragged_scales", Wrapper::kRaggedPrefill, {5}, {40}, [](AttentionCase& c) {
    c.kv_dtype = DType::kE4M3;
    c.k_scale = 0.25f;
    c.v_scale = 3.0f;
    c.options.pos_encoding = PosEncoding::kRopeLlama;
  });
  add("alibi_custom_slopes", Wrapper::kPagedPrefill, {4}, {12}, [](AttentionCase& c) {
    c.num_qo_heads = 6;
    c.options.pos_encoding = PosEncoding::kAlibi;
    c.options.alibi_slopes = {0.5f, 0.25f, 0.1f, 1.0f, 2.0f, 0.0f};
    c.options.sm_scale = 0.3f;
  });
  add("rope_scaled", Wrapper::kDecode, {1, 1}, {300, 77}, [](AttentionCase& c) {
    c.options.pos_encoding = PosEncoding::kRopeLlama;
    c.options.rope_scale = 4.0f;
    c.options.rope_theta = 5.0e5f;
    c.options.window_left = 50;
    c.options.logits_soft_cap = 15.0f;
  });
  name_cases(cases);
  return cases;
}

std::vector<AttentionCase> wide_attention_case_list(int count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<AttentionCase> cases;
  add_random_cases(cases, count, kValues, rng, make_case, [](const AttentionCase& c) { return cost(c); }, 4e8);
  name_cases(cases);
  return cases;
}

}  // namespace kvinfer::testing
