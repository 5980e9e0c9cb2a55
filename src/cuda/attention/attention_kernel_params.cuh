// SPDX-License-Identifier: Apache-2.0
// The kernel-facing parameters of attention: raw pointers and element strides
// taken from the checked AttentionParams, plus the schedule in the workspace.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/attention_params.hpp"
#include "core/schedule_view.hpp"
#include "cuda/attention/params/head_shape.cuh"
#include "cuda/attention/params/kv_source.cuh"
#include "cuda/attention/params/logits_transform.cuh"
#include "cuda/attention/params/mask.cuh"
#include "cuda/common/fast_divmod.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/params/output_tensors.cuh"
#include "cuda/params/query_tensor.cuh"

namespace kvinfer::cuda {

// Composed of parts, each built once from the checked problem by its own header's
// builder (make_kernel_params): the kernels read p.q, p.out, p.kv, p.heads, p.mask,
// p.logits and p.schedule, never the problem itself.
struct AttentionKernelParams {
  QueryTensor q;      // [nnz_q, Hq, Dqk]
  OutputTensors out;  // o [nnz_q, Hq, Dvo], lse [nnz_q, Hq] or null
  KVSource kv;        // paged cache or ragged tensors
  detail::ScheduleView schedule;
  // The one-warp (decode) tile: warps of its CTA that share each item's keys and
  // merge their states in the CTA (item_warps.cuh); 1 for every other kernel.
  std::int32_t item_warps;
  HeadShape heads;
  LogitsTransform logits;
  Mask mask;
  // Launch only: the attention kernel is a programmatic dependent launch
  // (RunOptions::enable_pdl). Its code is the same either way: it reads its plan,
  // then waits for the previous kernel before any tensor of the caller's.
  bool programmatic;
  HeadDims dims;  // read by the padded tile only
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
