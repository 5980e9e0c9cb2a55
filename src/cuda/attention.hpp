// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's attention entry points, called by AttentionPlan.
#pragma once

#include "core/attention_params.hpp"

namespace kvinfer::cuda {

// Packed query rows per work item of the kernel that will run this problem (the
// planner's q tile). Throws kvinfer::Error when no compiled kernel supports it.
std::int32_t q_tile_rows(const detail::AttentionProblem& problem);

// Launches the planned work items and the merge of split requests on p.stream.
void run_attention(const detail::AttentionParams& p);

}  // namespace kvinfer::cuda
