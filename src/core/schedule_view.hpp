// SPDX-License-Identifier: Apache-2.0
// A schedule uploaded into a plan's workspace, as the kernels see it: device
// pointers to its arrays (plan/schedule.hpp) and to the float workspace's partial
// states. One view serves every backend and every operation (GQA attention, MLA, the
// merge of split-KV), so a kernel's parameters hold it whole.
#pragma once

#include <cstdint>

#include "core/device_status.hpp"
#include "plan/schedule.hpp"

namespace kvinfer::detail {

struct ScheduleView {
  const RequestInfo* requests = nullptr;
  const WorkItem* items = nullptr;
  const MergeToken* merge_tokens = nullptr;
  const std::int32_t* counts = nullptr;  // num_items, num_merge_tokens, batch_size, nnz_q
  float* partial_o = nullptr;            // [max_partial_rows, H, Dvo]
  float* partial_lse = nullptr;          // [max_partial_rows, H], base 2
  DeviceStatus* status = nullptr;        // in the int buffer: the plan's, so each wrapper has its own
};

}  // namespace kvinfer::detail
