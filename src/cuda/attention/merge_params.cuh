// SPDX-License-Identifier: Apache-2.0
// The kernel-facing parameters of the split-KV merge, one set for GQA attention and
// MLA: where the partial states of split requests are (the schedule's layout in the
// float workspace, base-2 LSE) and where the merged rows go.
#pragma once

#include <cstdint>

#include "core/schedule_view.hpp"
#include "cuda/params/output_tensors.cuh"

namespace kvinfer::cuda {

struct MergeParams {
  OutputTensors out;       // [nnz_q, H, D] and [nnz_q, H] or null
  float lse_scale = 1.0f;  // of the LSE written: 1 (base 2) or ln 2 (MLA's base e)
  detail::ScheduleView schedule;  // the merge tokens and the partial states ([rows, H, D], [rows, H], base 2)
  std::int32_t num_qo_heads;      // H
};

}  // namespace kvinfer::cuda
