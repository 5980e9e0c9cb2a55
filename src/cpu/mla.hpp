// SPDX-License-Identifier: Apache-2.0
// The CPU backend's MLA attention: executes the planned work items over the paged
// MLA cache with a thread pool, then merges the partial states of split requests.
#pragma once

#include "core/mla_params.hpp"

namespace kvinfer::cpu {

void run_mla(const detail::MLAParams& p);

}  // namespace kvinfer::cpu
