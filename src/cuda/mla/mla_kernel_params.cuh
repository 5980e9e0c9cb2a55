// SPDX-License-Identifier: Apache-2.0
// The kernel-facing parameters of MLA attention: raw pointers and element strides
// taken from the checked MLAParams, the folded logit scales, and the schedule in the
// workspace.
#pragma once

#include <cstdint>

#include "core/device_status.hpp"
#include "core/mla_params.hpp"
#include "core/schedule_view.hpp"
#include "cuda/common/fast_divmod.cuh"
#include "cuda/params/kv_tensor.cuh"
#include "cuda/params/output_tensors.cuh"
#include "cuda/params/page_lookup.cuh"
#include "cuda/params/query_tensor.cuh"

namespace kvinfer::cuda {

struct MlaKernelParams {
  QueryTensor q_nope;  // [nnz_q, H, 512]
  QueryTensor q_pe;    // [nnz_q, H, 64], or absent without a rotary part
  OutputTensors out;   // [nnz_q, H, 512] and [nnz_q, H] or null; fp16 or bf16 (out.o_bf16)

  KVTensor ckv;                   // [max_pages, page_size, 512]
  KVTensor kpe;                   // [max_pages, page_size, 64], or absent
  PageLookup pages;               // num_pages: of ckv and of kpe, whichever has fewer
  detail::ScheduleView schedule;  // status: where a bad page id is recorded (core/device_status.hpp)

  FastDivmod num_heads;  // packed row -> (token, head)
  // Base-2 logits: (q_nope . ckv) * nope_scale + (q_pe . kpe) * pe_scale, with
  // nope_scale = sm_scale * log2(e) * ckv_scale and pe_scale likewise with kpe_scale.
  float nope_scale, pe_scale;
  float v_scale;    // ckv_scale: the value is ckv * ckv_scale
  float lse_scale;  // of the LSE written out: 1 (base 2) or ln 2 (base e)
  bool causal;
};

}  // namespace kvinfer::cuda
