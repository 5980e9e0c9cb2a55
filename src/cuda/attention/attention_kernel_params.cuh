// SPDX-License-Identifier: Apache-2.0
// The kernel-facing parameters of attention: raw pointers and element strides
// taken from the checked AttentionParams, plus the schedule in the workspace.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/attention_params.hpp"
#include "cuda/common/fast_divmod.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

struct AttentionKernelParams {
  const void* q;           // [nnz_q, Hq, Dqk]
  std::int64_t q_stride_n, q_stride_h;
  void* o;                 // [nnz_q, Hq, Dvo]
  std::int64_t o_stride_n, o_stride_h;
  float* lse;              // [nnz_q, Hq] or null
  std::int64_t lse_stride_n, lse_stride_h;

  const void* k;           // page views (paged) or ragged tensors
  const void* v;
  std::int64_t k_stride_page, k_stride_token, k_stride_head;  // ragged: page stride 0
  std::int64_t v_stride_page, v_stride_token, v_stride_head;
  const std::int32_t* kv_indices;  // paged: page ids; null for ragged
  FastDivmod page_size;            // ragged: 1 page of "infinite" size is avoided by kv_indices == null

  const detail::RequestInfo* requests;
  const detail::WorkItem* items;
  const detail::MergeToken* merge_tokens;
  const std::int32_t* counts;  // num_items, num_merge_tokens, batch_size, nnz_q
  float* partial_o;            // [partial rows, Hq, Dvo]
  float* partial_lse;          // [partial rows, Hq]
  // The one-warp (decode) tile: warps of its CTA that share each item's keys and
  // merge their states in the CTA (item_warps.cuh); 1 for every other kernel.
  std::int32_t item_warps;

  std::int32_t num_qo_heads;
  std::int32_t group_size;
  FastDivmod group_div;  // packed row -> (token, head in the group)
  float sm_scale;        // k_scale folded in
  float sm_scale_log2;   // sm_scale * log2(e)
  float logits_soft_cap; // 0: off
  float v_scale;
  bool rope;
  float rope_rcp_scale, rope_rcp_theta;
  const float* alibi_slopes;  // [Hq] or null
  bool causal;
  std::int32_t window_left;   // -1: no window
  const std::uint8_t* custom_mask;  // packed bits (RequestInfo::mask_offset), or null
  // Launch only: the attention kernel is a programmatic dependent launch
  // (RunOptions::enable_pdl). Its code is the same either way: it reads its plan,
  // then waits for the previous kernel before any tensor of the caller's.
  bool programmatic;
#if KVINFER_CUDA_TIMELINE
  std::uint64_t* timeline;  // the decode tiles' warp timeline (warp_timeline.cuh), or null
#endif
};

AttentionKernelParams make_kernel_params(const detail::AttentionParams& p);

// Every attention kernel calls this once it has read what only its plan wrote (its
// work item, its request's entry) and before any tensor of the caller's (q, the
// cache, page ids, the mask, out, lse): as a programmatic dependent launch
// (RunOptions::enable_pdl) it may have started while the kernel before it still
// writes them. It also lets the kernel after it (the merge of split-KV, or the
// caller's next) launch early.
__device__ __forceinline__ void wait_for_inputs() {
  wait_for_previous_kernel();
  allow_next_kernel();
}

// A work item in two 16-byte loads.
__device__ __forceinline__ detail::WorkItem load_work_item(const detail::WorkItem* at) {
  static_assert(sizeof(detail::WorkItem) == 32 && alignof(detail::WorkItem) <= 16);
  const uint4 a = ptx::ld_nc_v4(at), b = ptx::ld_nc_v4(reinterpret_cast<const uint4*>(at) + 1);
  detail::WorkItem item;
  item.request = std::int32_t(a.x);
  item.kv_head = std::int32_t(a.y);
  item.row_begin = std::int32_t(a.z);
  item.row_end = std::int32_t(a.w);
  item.kv_begin = std::int32_t(b.x);
  item.kv_end = std::int32_t(b.y);
  item.chunk = std::int32_t(b.z);
  item.kv_base = std::int32_t(b.w);
  return item;
}

// Whether this CTA's entry (load_work_item) is past the plan's items (the grid is sized
// for the array's capacity; detail::kUnusedItem): known from the entry alone, so the
// count need not be read first.
__device__ __forceinline__ bool unused_item(const detail::WorkItem& item) { return item.request == detail::kUnusedItem; }

}  // namespace kvinfer::cuda
