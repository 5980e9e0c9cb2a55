// SPDX-License-Identifier: Apache-2.0
// The engine behind every attention wrapper: holds the checked problem, the
// schedule and the workspace of one plan, and turns run() arguments into
// AttentionParams for the backend of the wrapper's device.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/attention_params.hpp"
#include "core/workspace.hpp"
#include "kvinfer/attention/options.hpp"
#include "kvinfer/attention/prefill.hpp"
#include "kvinfer/attention/run_options.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"
#include "plan/schedule.hpp"

namespace kvinfer::detail {

class Backend;

// Plan-time description gathered by a wrapper from its public PlanArgs.
struct PlanRequest {
  std::string_view op;  // public name used in error messages
  KVStorage storage = KVStorage::kRagged;
  std::vector<std::int32_t> qo_lens;   // per request
  std::vector<std::int32_t> kv_lens;   // keys per request
  std::vector<std::int32_t> kv_begin;  // ragged: first key row; paged: kv_indptr[i]
  std::int64_t nnz_kv = 0;
  std::int64_t num_qo_heads = 0, num_kv_heads = 0, head_dim_qk = 0, head_dim_vo = 0, page_size = 1;
  DType q_dtype = DType::kBF16, kv_dtype = DType::kBF16, o_dtype = DType::kBF16;
  AttentionOptions options;
  TensorView custom_mask;  // bool (unpacked) or uint8 (packed, little), or absent
  TensorView kv_indices;   // paged: read by run()
  SplitOptions split;
  std::int64_t max_qo_len = -1;  // rows of one request when fixed by the wrapper (decode: 1)
  std::vector<std::int32_t> position_offsets;  // per request, or empty (all 0)
};

// A plan in two steps, so that plan() is atomic: prepare() checks the arguments and
// makes the schedule without touching the plan in place (a bad argument leaves it
// as it was), commit() writes the device buffers run() reads. A commit that fails
// (out of memory) drops the plan: run() then throws until the next plan().
class AttentionPlan {
 public:
  // Everything a plan needs, checked, before it is written to the device.
  struct Prepared {
    std::string_view op;
    AttentionProblem problem;
    KernelKey kernel;
    Schedule schedule;
    TensorView kv_indices;
    Tensor mask_packed;      // a boolean custom mask packed (on the device), or absent
    TensorView caller_mask;  // the caller's packed mask, or absent
    std::vector<float> alibi_slopes;
    std::vector<std::int32_t> position_offsets;  // empty: all 0
  };

  // `op` names the owner (the wrapper, or single_prefill) in the constructor's errors.
  AttentionPlan(std::string_view op, Device device, KVLayout layout, std::optional<Capacity> capacity);

  Device device() const { return device_; }
  KVLayout layout() const { return layout_; }
  bool planned() const { return planned_; }
  const AttentionProblem& problem() const { return problem_; }
  const Schedule& schedule() const { return schedule_; }

  WorkspaceSize workspace_size(const PlanRequest& req) const;
  void plan(const PlanRequest& req);
  Prepared prepare(const PlanRequest& req) const;
  // Throws when the prepared schedule does not fit the workspace buffers in use.
  void check_workspace(const Prepared& p) const;
  void commit(Prepared&& p);
  // commit() into the given workspace buffers (the cascade's parts of its caller's
  // buffers, checked to fit by the caller), in place of those in use.
  void commit_into(Prepared&& p, const TensorView& float_buffer, const TensorView& int_buffer);
  // The caller's workspace buffers (absent: the plan's own); see PlanWorkspace.
  void reset_workspace_buffer(std::string_view op, const TensorView& float_buffer,
                              const TensorView& int_buffer);

  // Checks the run's tensors against the plan and executes it. k/v are the ragged
  // tensors or the cache's page views.
  void run(std::string_view op, const TensorView& q, const TensorView& k, const TensorView& v,
           const TensorView& out, const RunOptions& options) const;
  // The first bad page id the kernels met since the last plan() or status(); clears it.
  IndexStatus status(Stream stream) const;

 private:
  // Validation of the plan arguments shared by all wrappers; fills problem_.
  AttentionProblem check_problem(const PlanRequest& req) const;
  Schedule make_plan_schedule(const PlanRequest& req, const AttentionProblem& problem,
                              std::span<const std::int64_t> mask_offsets, KernelKey* kernel_out) const;
  void check_run(std::string_view op, const TensorView& q, const TensorView& k, const TensorView& v,
                 const TensorView& out, const RunOptions& options) const;

  Device device_;
  KVLayout layout_;
  std::optional<Capacity> capacity_;
  const Backend* backend_ = nullptr;
  DeviceProfile profile_;

  bool planned_ = false;
  AttentionProblem problem_;
  KernelKey kernel_;  // the backend's choice for problem_
  Schedule schedule_;
  TensorView kv_indices_;
  // Device buffers run() reads, kept across re-plans where they fit: a CUDA graph
  // captured from run() holds their addresses.
  Tensor custom_mask_packed_;  // a boolean mask packed by plan (grows, never shrinks)
  TensorView custom_mask_;     // what run reads: a prefix of custom_mask_packed_ or the caller's packed mask
  Tensor alibi_slopes_;        // float32 [Hq] on the device
  std::vector<std::int32_t> position_offsets_;  // per request (host; the CPU backend's), or empty
  PlanWorkspace workspace_;
};

// The PlanRequest of BatchPrefillWithPagedKVCache (attention_wrappers.cpp), which the
// cascade's levels share.
PlanRequest paged_prefill_request(const PagedPrefillPlanArgs& args, Device device);

}  // namespace kvinfer::detail
