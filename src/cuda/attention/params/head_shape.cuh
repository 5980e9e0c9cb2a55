// SPDX-License-Identifier: Apache-2.0
// The head shape of an attention kernel: query heads and their grouping over the KV
// heads. A work item's rows are packed (token, head in the group), row = token *
// group_size + head, so the divisor turns a packed row back into the two.
#pragma once

#include <cstdint>

#include "core/attention_params.hpp"
#include "cuda/common/fast_divmod.cuh"

namespace kvinfer::cuda {

struct HeadShape {
  std::int32_t num_qo_heads = 0;
  std::int32_t group_size = 1;  // query heads per KV head
  FastDivmod group_div;         // packed row -> (token, head in the group)
};

// The problem's head dims. A kernel's tiles have its instance's (template) head dims;
// the padded tile (padded_tile/) runs smaller ones zero-padded to those and reads
// these to copy, rotate and write only the problem's columns.
struct HeadDims {
  std::int32_t qk = 0, vo = 0;
};

inline HeadShape head_shape(const detail::AttentionProblem& pr) {
  return {std::int32_t(pr.num_qo_heads), std::int32_t(pr.group_size()),
          FastDivmod(std::uint32_t(pr.group_size()))};
}

}  // namespace kvinfer::cuda
