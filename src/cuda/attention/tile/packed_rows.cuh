// SPDX-License-Identifier: Apache-2.0
// Packed query rows: a work item's rows are the query rows of one KV head's group,
// token-major; row i -> (token, qo head) and its q row's address.
#pragma once

#include <cstdint>
#include "cuda/attention/attention_kernel_params.cuh"

namespace kvinfer::cuda {

// Packed row i of a work item: packed row row_begin + i is token
// (row_begin + i) / group of the request, qo head kv_head * group + (row_begin + i) % group.
struct PackedRow {
  std::int64_t token, head;
};
__device__ __forceinline__ PackedRow packed_row(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                int group, int i) {
  std::uint32_t in_group;
  const std::int64_t tok = p.heads.group_div.divmod(std::uint32_t(item.row_begin + i), &in_group);
  return {tok, std::int64_t(item.kv_head * group + in_group)};
}

// Address of packed row i of a work item's q tile (16-bit q).
__device__ __forceinline__ const char* packed_q_row(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                    const detail::RequestInfo& r, int group, int i) {
  const PackedRow row = packed_row(p, item, group, i);
  return static_cast<const char*>(p.q.data) +
         ((r.qo_begin + row.token) * p.q.stride_n + row.head * p.q.stride_h) * 2;
}

}  // namespace kvinfer::cuda
