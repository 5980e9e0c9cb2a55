// SPDX-License-Identifier: Apache-2.0
// The kernel-facing parameters of the split-KV merge, one set for GQA attention and
// MLA: where the partial states of split requests are (the schedule's layout in the
// float workspace, base-2 LSE) and where the merged rows go.
#pragma once

#include <cstdint>

#include "plan/schedule.hpp"

namespace kvinfer::cuda {

struct MergeParams {
  void* o;  // [nnz_q, H, D]
  std::int64_t o_stride_n, o_stride_h;
  float* lse;  // [nnz_q, H] or null
  std::int64_t lse_stride_n, lse_stride_h;
  float lse_scale = 1.0f;  // of the LSE written: 1 (base 2) or ln 2 (MLA's base e)

  const detail::RequestInfo* requests;
  const detail::MergeToken* merge_tokens;
  const std::int32_t* counts;  // num_items, num_merge_tokens, batch_size, nnz_q
  float* partial_o;            // [partial rows, H, D]
  float* partial_lse;          // [partial rows, H], base 2
  std::int32_t num_qo_heads;   // H
};

}  // namespace kvinfer::cuda
