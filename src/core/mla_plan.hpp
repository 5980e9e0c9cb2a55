// SPDX-License-Identifier: Apache-2.0
// The engine behind BatchMLAPagedAttention: checks the plan arguments, makes the
// shared schedule (MLA as GQA with one KV head), keeps it in a PlanWorkspace, and
// turns run() arguments into MLAParams for the backend of the wrapper's device.
#pragma once

#include <optional>
#include <vector>

#include "core/mla_params.hpp"
#include "core/workspace.hpp"
#include "kvinfer/attention/mla.hpp"
#include "plan/device_profile.hpp"
#include "plan/schedule.hpp"

namespace kvinfer::detail {

class Backend;

class MLAPlan {
 public:
  MLAPlan(Device device, std::optional<Capacity> capacity);

  Device device() const { return device_; }
  bool planned() const { return planned_; }
  const MLAProblem& problem() const { return problem_; }
  const Schedule& schedule() const { return schedule_; }

  WorkspaceSize workspace_size(const MLAPlanArgs& args) const;
  void plan(const MLAPlanArgs& args);
  // The caller's workspace buffers (absent: the plan's own); see PlanWorkspace.
  void reset_workspace_buffer(const TensorView& float_buffer, const TensorView& int_buffer);
  void run(const TensorView& q_nope, const TensorView& q_pe, const MLACache& cache, const TensorView& out,
           const MLARunOptions& options) const;
  // The first bad page id the kernels met since the last plan() or status(); clears it.
  IndexStatus status(Stream stream) const;

 private:
  // The plan arguments after validation.
  struct Checked {
    MLAProblem problem;
    std::vector<std::int32_t> qo_lens, kv_lens;
    std::vector<std::int32_t> kv_begin;  // kv_indptr[i]: first page slot of request i
  };
  Checked check_plan(const MLAPlanArgs& args) const;
  // The schedule of a checked call, and the key of the kernel that will run it.
  Schedule make_plan_schedule(const Checked& c, const SplitOptions& split, KernelKey* kernel_out = nullptr) const;
  void check_run(const TensorView& q_nope, const TensorView& q_pe, const MLACache& cache,
                 const TensorView& out, const MLARunOptions& options) const;

  Device device_;
  std::optional<Capacity> capacity_;
  const Backend* backend_ = nullptr;
  DeviceProfile profile_;

  bool planned_ = false;
  MLAProblem problem_;
  KernelKey kernel_;
  Schedule schedule_;
  TensorView kv_indices_;
  PlanWorkspace workspace_;
};

}  // namespace kvinfer::detail
