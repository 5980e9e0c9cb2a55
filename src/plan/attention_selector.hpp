// SPDX-License-Identifier: Apache-2.0
// The attention kernel selector of the CUDA backend as a pure function: a checked
// problem and what the device and the build offer, as plain values, to the kernel
// that plans the work and the kernel that runs it. The rules and the reason for
// each are in attention_selector.cpp (and docs/kernels.md); the unit tests run them
// on the CPU with the H200's capabilities.
#pragma once

#include <string>
#include <vector>

#include "core/attention_params.hpp"

namespace kvinfer::detail {

// One compiled instance of an attention kernel family (cmake/KvinferInstances.cmake).
struct AttentionInstance {
  KernelFamily family = KernelFamily::kTensorCoreTile;
  DType q = DType::kBF16, kv = DType::kBF16;
  int head_dim_qk = 0, head_dim_vo = 0;
};

// Whether paged KV takes the warp-specialised prefill (its producer warpgroup gathering
// rows by page id) rather than the wgmma mainloop. On the H200 the gathers took
// 0.76-0.85 of the mainloop's time at head_dim 128, 0.94-0.99 at 256 and 0.87-1.11 at
// 64, where only 16 requests of 1k keys ran slower (docs/log/ws-prefill-2026-12-03.md).
inline constexpr bool kWsPrefillPaged = true;

// What a CUDA device and the build offer the selector.
struct AttentionKernelCaps {
  // Every compiled instance of every family, in the registry's order (a key's
  // `instance` is an index of this list).
  std::vector<AttentionInstance> instances;
  bool hopper = false;             // an sm_90 device running this build's sm_90a code
  std::string preset = "default";  // the instance preset, for the error that names it
  // Paged KV on the warp-specialised prefill: kWsPrefillPaged, or what the CUDA
  // backend's KVINFER_WS_PREFILL_PAGED (0 or 1) says, to measure and test both paths.
  bool ws_prefill_paged = kWsPrefillPaged;
};

struct AttentionSelection {
  // The kernel whose tile shapes the plan (its rows; the backend asks it for the
  // CTAs per SM and item warps) and the kernel run() launches. They differ in one
  // case: 16-bit decode of groups 2-8 at head_dim 128 plans as the 16-row tile and
  // runs on the key-row tile (the .cpp says why one plan suits both).
  KernelKey plan, run;
};

// The general logits (custom mask, ALiBi, soft cap): a separate tile kernel, 64-row
// tiles only.
bool general_logits(const AttentionProblem& problem);

// Throws kvinfer::Error naming the argument (out.dtype, options.backend) or the
// build option (the instance preset) when no compiled kernel supports the problem.
AttentionSelection select_attention_kernel(const AttentionProblem& problem, const AttentionKernelCaps& caps);

}  // namespace kvinfer::detail
