// SPDX-License-Identifier: Apache-2.0
// The CPU backend's attention: executes the planned work items with a thread
// pool, then merges the partial states of split requests.
#pragma once

#include "core/attention_params.hpp"

namespace kvinfer::cpu {

void run_attention(const detail::AttentionParams& p);

}  // namespace kvinfer::cpu
