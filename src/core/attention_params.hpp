// SPDX-License-Identifier: Apache-2.0
// Everything a backend needs to execute one planned attention call: the checked
// problem, the tensors of this run, and the schedule in the workspace. Made by
// AttentionPlan::run after validation; backends trust it.
#pragma once

#include <cstdint>
#include <optional>

#include "core/kernel_key.hpp"
#include "core/schedule_view.hpp"
#include "kvinfer/attention/options.hpp"
#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/kv_layout.hpp"
#include "plan/schedule.hpp"

namespace kvinfer::detail {

enum class KVStorage : std::uint8_t { kRagged, kPaged };

// The shape of the problem, fixed at plan time.
struct AttentionProblem {
  KVStorage storage = KVStorage::kRagged;
  KVLayout layout = KVLayout::kNHD;
  std::int64_t batch_size = 0;
  std::int64_t nnz_q = 0;
  std::int64_t nnz_kv = 0;      // ragged: key rows; paged: entries of kv_indices used
  std::int32_t max_qo_len = 0;  // query rows of the longest request
  // A fixed or disabled split in a wrapper whose query rows per request are not fixed:
  // the kernel is chosen as for long queries whatever this batch's lengths, so that
  // the arithmetic a request sees does not depend on the rest of the batch.
  bool length_free_kernel = false;
  std::int64_t num_qo_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim_qk = 0;
  std::int64_t head_dim_vo = 0;
  std::int64_t page_size = 1;
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  DType o_dtype = DType::kBF16;
  MaskMode mask_mode = MaskMode::kNone;
  int window_left = -1;
  float logits_soft_cap = 0.0f;
  float sm_scale = 1.0f;  // before k_scale
  PosEncoding pos_encoding = PosEncoding::kNone;
  float rope_rcp_scale = 1.0f;
  float rope_rcp_theta = 1.0e-4f;
  PrefillBackend backend = PrefillBackend::kAuto;

  std::int64_t group_size() const { return num_qo_heads / num_kv_heads; }
};

struct AttentionParams {
  AttentionProblem problem;
  KernelKey kernel;       // chosen at plan time
  float sm_scale = 1.0f;  // problem.sm_scale * k_scale
  float v_scale = 1.0f;

  // Tensors of this run, on the run's device.
  TensorView q;           // [nnz_q, Hq, Dqk]
  TensorView o;           // [nnz_q, Hq, Dvo]
  TensorView lse;         // [nnz_q, Hq] float32, or absent
  TensorView k, v;        // ragged: NHD [nnz_kv, Hk, D] / HND [Hk, nnz_kv, D]; paged: 4-D page views
  TensorView kv_indices;  // paged: int32 [>= nnz_kv]
  const float* alibi_slopes = nullptr;        // [Hq], with PosEncoding::kAlibi
  const std::uint8_t* custom_mask = nullptr;  // packed bits, little order; RequestInfo::mask_offset
  // Per request: its rows' shift from the bottom-right (PlanArgs::position_offsets), on
  // the host; null: all 0 (the only case the CUDA backend is given).
  const std::int32_t* position_offsets = nullptr;

  // The schedule, in the workspace of the run's device.
  ScheduleView schedule;  // partial states: [max_partial_rows, H, Dvo] and [max_partial_rows, H]
  std::int32_t q_tile_rows = 0;          // packed rows per work item (the kernel's tile)
  std::int64_t max_items = 0;            // grid sizes: fixed within a capacity
  std::int64_t max_merge_tokens = 0;
  std::int32_t max_chunks = 1;  // the most chunks of one request (this plan's)
  bool fixed_split = false;     // a fixed split size: results independent of the rest of the batch
  std::int32_t item_warps = 1;  // warps that share each item's keys (Schedule::item_warps)
  Stream stream = nullptr;
  std::optional<bool> enable_pdl;  // RunOptions::enable_pdl
};

}  // namespace kvinfer::detail
