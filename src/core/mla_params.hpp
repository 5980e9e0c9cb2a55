// SPDX-License-Identifier: Apache-2.0
// Everything a backend needs to execute one planned MLA call: the checked problem,
// the tensors of this run and the schedule in the workspace. Made by MLAPlan::run
// after validation; backends trust it.
#pragma once

#include <cstdint>

#include "core/device_status.hpp"
#include "core/kernel_key.hpp"
#include "core/schedule_view.hpp"
#include "kvinfer/core/tensor.hpp"
#include "plan/schedule.hpp"

namespace kvinfer::detail {

// The shape of an MLA problem, fixed at plan time. In the schedule MLA is GQA with
// one KV head: packed row r of a request is token r / num_heads, head r % num_heads.
struct MLAProblem {
  std::int64_t batch_size = 0;
  std::int64_t nnz_q = 0;
  std::int64_t nnz_kv = 0;  // entries of kv_indices used (pages)
  std::int64_t num_heads = 0;
  std::int64_t head_dim_ckv = 0;
  std::int64_t head_dim_kpe = 0;  // 0: no rotary part
  std::int64_t page_size = 1;
  bool causal = false;
  // Query rows of the longest request the plan's kernel must hold (with a fixed
  // capacity, the capacity's: every re-plan keeps the kernel).
  std::int64_t max_qo_len = 0;
  float sm_scale = 1.0f;
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  DType o_dtype = DType::kBF16;
};

struct MLAParams {
  MLAProblem problem;
  KernelKey kernel;         // chosen at plan time
  float ckv_scale = 1.0f;   // multiplies q_nope·ckv and the value
  float kpe_scale = 1.0f;   // multiplies q_pe·kpe
  bool lse_base_e = false;  // the LSE written out; partial states stay base 2

  // Tensors of this run, on the run's device.
  TensorView q_nope;      // [nnz_q, H, Dckv]
  TensorView q_pe;        // [nnz_q, H, Dkpe], absent when Dkpe == 0
  TensorView o;           // [nnz_q, H, Dckv]
  TensorView lse;         // [nnz_q, H] float32, or absent
  TensorView ckv;         // [max_pages, page_size, Dckv]
  TensorView kpe;         // [max_pages, page_size, Dkpe], absent when Dkpe == 0
  TensorView kv_indices;  // int32 [>= nnz_kv]

  // The schedule, in the workspace of the run's device.
  ScheduleView schedule;  // partial states: [max_partial_rows, H, Dckv] and [max_partial_rows, H]
  std::int64_t max_items = 0;            // grid sizes: fixed within a capacity
  std::int64_t max_merge_tokens = 0;
  std::int32_t q_tile_rows = 0;          // packed rows per work item (the kernel's tile)
  std::int32_t max_chunks = 1;           // the most chunks of one request
  bool fixed_split = false;              // a fixed split size: results independent of the rest of the batch
  Stream stream = nullptr;
};

}  // namespace kvinfer::detail
