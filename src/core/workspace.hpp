// SPDX-License-Identifier: Apache-2.0
// The two device buffers of a plan: the int workspace holding the schedule's
// arrays (written on the host, copied once per plan) and the float workspace for
// the partial states of split-KV. Each buffer is the plan's own (grown as needed)
// or the caller's (FlashInfer's float_workspace_buffer / int_workspace_buffer): one
// float buffer may serve every wrapper of a model, since a run() writes and merges
// its partial states before the next kernel on the stream reads the buffer again.
// The int buffer holds a plan, so it serves one wrapper.
#pragma once

#include <string_view>

#include "core/device_status.hpp"
#include "core/schedule_view.hpp"
#include "kvinfer/core/tensor.hpp"
#include "plan/schedule.hpp"

namespace kvinfer::detail {

// Copies a schedule's device pointers and grid sizes into the params of a backend
// call (AttentionParams, MLAParams: both hold a ScheduleView and the grid sizes).
template <class Params>
void bind_schedule(Params& p, const ScheduleView& sv, const Schedule& s) {
  p.schedule = sv;
  p.max_items = s.max_items;
  p.max_merge_tokens = s.max_merge_tokens;
}

class PlanWorkspace {
 public:
  // A fixed workspace (CUDA-graph capacity) is sized by its first upload and never
  // reallocated, so captured pointers stay valid across re-plans.
  PlanWorkspace(Device device, bool fixed) : device_(device), fixed_(fixed) {}

  // Uses the caller's buffers from now on (an absent view: the plan's own buffer).
  // Checks device, contiguity, alignment and, when a plan is in place (`current`),
  // that it fits; later plans are checked at their upload. Nothing changes when a
  // check fails. Returns whether the int buffer changed: the caller then uploads its
  // schedule again.
  bool use_buffers(std::string_view op, const TensorView& float_buffer, const TensorView& int_buffer,
                   const WorkspaceLayout* current);

  // Throws (changing nothing) when a schedule of `layout` would not fit: a caller's
  // buffer too small, or a fixed workspace that would have to grow.
  void check_fits(std::string_view op, const WorkspaceLayout& layout) const;
  void upload(std::string_view op, const Schedule& s, std::int64_t batch_size, std::int64_t nnz_q);
  ScheduleView view(const WorkspaceLayout& layout) const;

 private:
  Device device_;
  bool fixed_;
  Tensor int_buffer_;
  Tensor float_buffer_;
  TensorView caller_int_;  // the caller's buffers, when given
  TensorView caller_float_;
  Tensor staging_;  // host copy of the int buffer for GPU devices
};

// The alignment a caller's buffer needs: the kernels read partial states and the
// schedule's entries in 16-byte vectors (the layout's offsets are multiples of 256).
inline constexpr std::size_t kWorkspaceAlign = 16;

}  // namespace kvinfer::detail
