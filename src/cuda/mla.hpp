// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's MLA entry point, called by MLAPlan.
#pragma once

#include "core/mla_params.hpp"

namespace kvinfer::cuda {

// Launches the planned MLA work items and the merge of split requests on p.stream.
// Throws kvinfer::Error when no compiled kernel supports the problem.
void run_mla(const detail::MLAParams& p);

}  // namespace kvinfer::cuda
