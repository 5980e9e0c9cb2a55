// SPDX-License-Identifier: Apache-2.0
// The float64 oracle: a dense, obviously correct implementation of SPEC §2-§4 for
// one request at a time (explicit mask matrix, full score rows). Every backend is
// compared with it. Inputs and outputs are plain row-major std::vector<double>.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvinfer/attention/options.hpp"
#include "kvinfer/layout/mask.hpp"

namespace kvinfer::oracle {

// One request of attention (SPEC §3). Positions: query row i sits at
// i_pos = i + kv_len - qo_len + q_pos_offset, key j at j_pos = j + kv_pos_offset.
// Every position-dependent term (causal, window, RoPE, ALiBi) uses i_pos and j_pos,
// so with the global offsets of a cascade level (kv_pos_offset = first key of the
// level, q_pos_offset = total_kv_len - kv_len) a level sees exactly its part of the
// full request. With both offsets 0 this is SPEC §2/§3 verbatim.
struct AttentionSpec {
  std::int64_t qo_len = 0;
  std::int64_t kv_len = 0;
  std::int64_t num_qo_heads = 1;
  std::int64_t num_kv_heads = 1;
  std::int64_t head_dim_qk = 0;
  std::int64_t head_dim_vo = 0;
  MaskMode mask_mode = MaskMode::kNone;
  std::vector<std::uint8_t> custom_mask;  // [qo_len, kv_len] row-major, non-zero = keep (kCustom)
  int window_left = -1;                   // w >= 0 keeps j_pos >= i_pos - w; -1 disables
  double logits_soft_cap = 0.0;           // > 0: s = cap * tanh(s / cap)
  std::optional<double> sm_scale;         // default 1 / sqrt(head_dim_qk)
  PosEncoding pos_encoding = PosEncoding::kNone;
  double rope_scale = 1.0;
  double rope_theta = 1.0e4;
  std::vector<double> alibi_slopes;       // [num_qo_heads]; empty: alibi_slopes_reference(num_qo_heads)
  std::int64_t q_pos_offset = 0;
  std::int64_t kv_pos_offset = 0;

  double effective_sm_scale() const;
};

// The spec of one request from the options a wrapper receives (floats widened to
// double; the custom mask, when any, is set by the caller).
AttentionSpec spec_from_options(const AttentionOptions& options, std::int64_t qo_len,
                                std::int64_t kv_len, std::int64_t num_qo_heads,
                                std::int64_t num_kv_heads, std::int64_t head_dim_qk,
                                std::int64_t head_dim_vo);

// An attention state over some keys: o [rows, num_heads, head_dim] and its base-2
// LSE [rows, num_heads]; LSE = -inf (and o = 0) for a row that saw no key.
struct AttentionResult {
  std::vector<double> o;
  std::vector<double> lse;
};

// Row i sees key j: value [i * kv_len + j] is 1 or 0. Causal, window and custom
// mask applied together.
std::vector<std::uint8_t> visibility(const AttentionSpec& spec);

// q [qo_len, num_qo_heads, head_dim_qk], k [kv_len, num_kv_heads, head_dim_qk],
// v [kv_len, num_kv_heads, head_dim_vo]. Throws std::invalid_argument on
// inconsistent sizes.
AttentionResult attention(const AttentionSpec& spec, std::span<const double> q,
                          std::span<const double> k, std::span<const double> v);

// RoPE (rotate-half, pair (d, d + D/2)) of one head vector x [D] at `pos`, in place.
void apply_rope(std::span<double> x, double pos, double rope_scale, double rope_theta);

// MLA (SPEC §4): logits (q_nope·ckv_j + q_pe·kpe_j) * sm_scale, value ckv_j, causal
// bottom-right when `causal`. q_nope [qo_len, num_heads, head_dim_ckv],
// q_pe [qo_len, num_heads, head_dim_kpe], ckv [kv_len, head_dim_ckv],
// kpe [kv_len, head_dim_kpe]. o is [qo_len, num_heads, head_dim_ckv], LSE base 2.
struct MLASpec {
  std::int64_t qo_len = 0;
  std::int64_t kv_len = 0;
  std::int64_t num_heads = 1;
  std::int64_t head_dim_ckv = 0;
  std::int64_t head_dim_kpe = 0;  // 0: no rotary part
  bool causal = false;
  double sm_scale = 0.0;  // required, as in BatchMLAPagedAttention
};
AttentionResult mla_attention(const MLASpec& spec, std::span<const double> q_nope,
                              std::span<const double> q_pe, std::span<const double> ckv,
                              std::span<const double> kpe);

// SPEC §4 merge of two states over disjoint key sets: o [n, H, D], lse [n, H]
// (base 2). Two empty rows give o = 0, lse = -inf.
AttentionResult merge_state(std::span<const double> o_a, std::span<const double> lse_a,
                            std::span<const double> o_b, std::span<const double> lse_b);
AttentionResult merge_state(const AttentionResult& a, const AttentionResult& b);
// Merge of K >= 1 states of equal shape; with K = 1 the result is that state.
AttentionResult merge_states(std::span<const AttentionResult> states);

// The standard ALiBi slopes, computed as in the ALiBi paper's reference code
// (recursively from the power-of-two series), independently of kvinfer::alibi_slopes.
std::vector<double> alibi_slopes_reference(int num_heads);

}  // namespace kvinfer::oracle
