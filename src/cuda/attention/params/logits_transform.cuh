// SPDX-License-Identifier: Apache-2.0
// What an attention kernel does to q . k before the softmax: the scale (k_scale folded
// in, and its base-2 form for exp2), the logits soft cap, and the position encoding
// (RoPE applied to q and k in the kernel, or ALiBi's per-head slopes).
#pragma once

#include "core/attention_params.hpp"

namespace kvinfer::cuda {

struct LogitsTransform {
  float sm_scale = 1.0f;       // k_scale folded in
  float sm_scale_log2 = 1.0f;  // sm_scale * log2(e)
  float soft_cap = 0.0f;       // 0: off
  // rope on an 8-byte boundary, its two factors after it: the CUDA-core decode kernel
  // loads parameters in 8-byte pairs where they align, and other pairs schedule its
  // prologue differently from the code that was measured.
  alignas(8) bool rope = false;
  float rope_rcp_scale = 1.0f, rope_rcp_theta = 1.0e-4f;
  const float* alibi_slopes = nullptr;  // [Hq] or null
};

inline LogitsTransform logits_transform(const detail::AttentionParams& p) {
  const detail::AttentionProblem& pr = p.problem;
  return {.sm_scale = p.sm_scale,
          .sm_scale_log2 = p.sm_scale * 1.4426950408889634f,
          .soft_cap = pr.logits_soft_cap,
          .rope = pr.pos_encoding == PosEncoding::kRopeLlama,
          .rope_rcp_scale = pr.rope_rcp_scale,
          .rope_rcp_theta = pr.rope_rcp_theta,
          .alibi_slopes = pr.pos_encoding == PosEncoding::kAlibi ? p.alibi_slopes : nullptr};
}

}  // namespace kvinfer::cuda
