// SPDX-License-Identifier: Apache-2.0
// The kernel-facing parameters of MLA attention: raw pointers and element strides
// taken from the checked MLAParams, the folded logit scales, and the schedule in the
// workspace.
#pragma once

#include <cstdint>

#include "core/device_status.hpp"
#include "core/mla_params.hpp"
#include "cuda/common/fast_divmod.cuh"

namespace kvinfer::cuda {

struct MlaKernelParams {
  const void* q_nope;  // [nnz_q, H, 512]
  std::int64_t q_nope_stride_n, q_nope_stride_h;
  const void* q_pe;    // [nnz_q, H, 64], or null without a rotary part
  std::int64_t q_pe_stride_n, q_pe_stride_h;
  void* o;             // [nnz_q, H, 512]
  std::int64_t o_stride_n, o_stride_h;
  bool o_bf16;         // out is bfloat16 (else float16)
  float* lse;          // [nnz_q, H] or null
  std::int64_t lse_stride_n, lse_stride_h;

  const void* ckv;  // [max_pages, page_size, 512]
  std::int64_t ckv_stride_page, ckv_stride_token;
  const void* kpe;  // [max_pages, page_size, 64], or null
  std::int64_t kpe_stride_page, kpe_stride_token;
  const std::int32_t* kv_indices;
  FastDivmod page_size;
  std::uint32_t num_pages;        // page ids must be below it (the pages of ckv and of kpe)
  detail::DeviceStatus* status;   // where a bad page id is recorded (core/device_status.hpp)

  const detail::RequestInfo* requests;
  const detail::WorkItem* items;
  float* partial_o;    // [partial rows, H, 512]
  float* partial_lse;  // [partial rows, H], base 2

  FastDivmod num_heads;  // packed row -> (token, head)
  // Base-2 logits: (q_nope . ckv) * nope_scale + (q_pe . kpe) * pe_scale, with
  // nope_scale = sm_scale * log2(e) * ckv_scale and pe_scale likewise with kpe_scale.
  float nope_scale, pe_scale;
  float v_scale;    // ckv_scale: the value is ckv * ckv_scale
  float lse_scale;  // of the LSE written out: 1 (base 2) or ln 2 (base e)
  bool causal;
};

}  // namespace kvinfer::cuda
