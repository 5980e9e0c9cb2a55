// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's attention entry points, called by AttentionPlan.
#pragma once

#include <cstdint>

#include "core/attention_params.hpp"

namespace kvinfer::cuda {

// What the planner needs to know of the kernel that will run a problem.
struct KernelTraits {
  detail::KernelKey key;         // what run_attention launches
  std::int32_t q_tile_rows;      // packed query rows per work item
  int work_items_per_processor;  // resident CTAs per SM (of one warp, for item warps)
  int max_item_warps;            // warps one item's CTA may run (1: the kernel has no item warps)
};

// Selects the kernel for `problem` on `device`; throws kvinfer::Error naming the
// build option or argument when no compiled kernel supports it.
KernelTraits select_kernel(const detail::AttentionProblem& problem, int device);

// Launches the planned work items (the kernel of p.kernel, as select_kernel chose it)
// and the merge of split requests on p.stream.
// Allocates nothing and never synchronises (capturable in a CUDA graph).
void run_attention(const detail::AttentionParams& p);

}  // namespace kvinfer::cuda
