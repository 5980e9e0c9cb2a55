// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's MLA entry points, called by MLAPlan.
#pragma once

#include <cstdint>

#include "core/mla_params.hpp"

namespace kvinfer::cuda {

// What the planner needs from the kernel that will run an MLA problem: packed query
// rows per work item (16, 32 or 64: the fewest that hold max_item_rows) and the CTAs
// an SM holds at once.
struct MlaKernelTraits {
  int q_tile_rows = 64;
  int work_items_per_processor = 1;
};

// Throws kvinfer::Error when no compiled kernel supports the problem.
MlaKernelTraits select_mla_kernel(const detail::MLAProblem& pr, std::int64_t max_item_rows, int device);

// Launches the planned MLA work items and the merge of split requests on p.stream.
// Throws kvinfer::Error when no compiled kernel supports the problem or a tensor's
// rows are not 16-byte aligned.
void run_mla(const detail::MLAParams& p);

}  // namespace kvinfer::cuda
