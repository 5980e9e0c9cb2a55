// SPDX-License-Identifier: Apache-2.0
// Options shared by every attention wrapper (docs/semantics.md §3): mask, window, soft cap,
// scale, positional encoding.
//
// Non-finite values (NaN, ±inf) in q, k or v: one rule on every CPU path (portable
// and AVX2 loops, decode and prefill tiles, split-KV and its merge, MLA); the CUDA
// clauses follow it:
//  1. What a query row does not see never reaches it: the K and V rows of keys
//     masked for that row (causal, window, custom mask), of other requests, heads or
//     pages, may hold anything, NaN included, without changing the row's o or LSE.
//  2. A key of weight 0 adds nothing: its V row is never multiplied (a logit of -inf,
//     or 2^(s - max) below float's range, is weight 0, as a masked key).
//  3. Otherwise NaN propagates, as in FlashInfer: a NaN or +inf logit among the keys
//     a row sees (a NaN or inf in q or in a visible key's k, or q·k beyond float's
//     range) makes every element of that row's o NaN and its LSE NaN; with a soft cap
//     an infinite logit is capped to ±cap and stays finite. A NaN or inf in the V row
//     of a key of non-zero weight reaches o (NaN or ±inf) and leaves the LSE as is.
//  4. Merging states (split-KV chunks, cascade levels, merge_state(s)): a state of LSE
//     -inf weighs nothing, and a state merged only with such states comes out bit for
//     bit; otherwise a NaN LSE makes the merged o and LSE NaN.
// The CUDA kernels follow rules 2-4 and rule 1 for other requests, heads and pages and
// for the K rows of masked keys, with two clauses of their tensor-core arithmetic (as
// FlashAttention's and FlashInfer's):
//  1'. A NaN or inf in the V row of a key masked for a row, in a key tile that the
//     row's tile reads (same request and KV head), reaches the row: its o becomes NaN
//     (0 x NaN in the P.V product), its LSE stays as it was.
//  5. Logits are exponentiated as 2^(s * scale - max * scale) in one fused
//     multiply-add: the rounding of max * scale shifts every weight of the row by up
//     to half its ulp, which cancels in o and moves the LSE by as much while
//     |max * scale| < 2^30 (bf16 q and k up to ~1e4 at head_dim 128); beyond, the
//     weights leave float's range and the row's o and LSE are not defined.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "kvinfer/layout/mask.hpp"

namespace kvinfer {

enum class PosEncoding {
  kNone,
  kRopeLlama,  // rotate-half RoPE applied to q and k inside the kernel
  kAlibi,      // s_j += slope_h * (j - i_pos)
};

std::string_view pos_encoding_name(PosEncoding p);

// Which tensor-core mainloop the CUDA prefill kernels use (FlashInfer's backend
// "fa2" / "fa3"). kAuto: the Hopper one (wgmma) on sm_90 where it applies (16-bit KV
// of the query's type, equal head dims 64/128/256, no RoPE, ALiBi, soft cap or custom
// mask, tiles of 128 query rows), else the portable one (mma.sync, sm_80+). kHopper
// where it cannot apply is an error at plan time. The CPU backend ignores it.
enum class PrefillBackend {
  kAuto,
  kPortable,
  kHopper,
};

std::string_view prefill_backend_name(PrefillBackend b);

struct AttentionOptions {
  MaskMode mask_mode = MaskMode::kNone;
  int window_left = -1;                 // w >= 0 keeps keys j >= i_pos - w; -1 disables
  float logits_soft_cap = 0.0f;         // > 0: s = cap * tanh(s / cap)
  std::optional<float> sm_scale;        // default 1 / sqrt(head_dim_qk)
  PosEncoding pos_encoding = PosEncoding::kNone;
  float rope_scale = 1.0f;
  float rope_theta = 1.0e4f;
  std::vector<float> alibi_slopes;      // empty: the standard slopes for num_qo_heads
  PrefillBackend backend = PrefillBackend::kAuto;  // CUDA prefill only; same results within tolerance
};

// The standard ALiBi slopes for n heads: 2^(-8(i+1)/n') for the largest power of
// two n' <= n, then the interleaved odd terms of the series for 2n' (as in the
// ALiBi paper's reference code).
std::vector<float> alibi_slopes(int num_heads);

}  // namespace kvinfer
