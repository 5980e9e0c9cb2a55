// SPDX-License-Identifier: Apache-2.0
// The end of a work item whose page lookups met an id outside the cache (KeyLocator,
// checked_page): the item read page 0 in its place, so what it computed is discarded.
// Its rows become zeros with LSE -inf, all of its heads, or, for a chunk of a split
// request, its partial LSE becomes kBadChunkLse, which the merge turns into such a
// row; the first bad entry of its pages goes to the device status. Every thread of
// the CTA calls it after the epilogue, whose writes its barrier orders before these.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/packed_rows.cuh"
#include "cuda/common/device_status.cuh"
#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

// Whether any thread of the CTA saw a bad page id; a barrier of the CTA (a warp's for a
// one-warp CTA).
template <bool kOneWarpCta>
__device__ __forceinline__ bool cta_any(bool x) {
  if constexpr (kOneWarpCta) {
    return __any_sync(0xffffffffu, x);
  } else {
    return __syncthreads_or(x);
  }
}

// The pages scanned for the record are those of the item's whole key range, which
// hold every page its threads looked up.
template <class TO, int DVO, bool kOneWarpCta>
__device__ __forceinline__ void discard_bad_item(const AttentionKernelParams& p, const detail::WorkItem& item,
                                                 const detail::RequestInfo& r, int rows, bool bad) {
  if (!cta_any<kOneWarpCta>(bad)) return;
  if (threadIdx.x == 0) {
    const std::int64_t first = item.kv_base + p.page_size.div(std::uint32_t(item.kv_begin));
    const std::int64_t last = item.kv_base + p.page_size.div(std::uint32_t(item.kv_end - 1)) + 1;
    record_bad_pages(p.status, p.kv_indices, first, last, p.num_pages, item.request);
  }
  constexpr int kChunks = DVO * int(sizeof(TO)) / 16;  // 16-byte chunks of an output row
  for (int i = int(threadIdx.x); i < rows * kChunks; i += int(blockDim.x)) {
    const PackedRow row = packed_row(p, item, p.group_size, i / kChunks);
    if (r.num_chunks > 1) {
      const std::int64_t prow = r.partial_begin + std::int64_t(item.chunk) * r.qo_len + row.token;
      if (i % kChunks == 0) p.partial_lse[prow * p.num_qo_heads + row.head] = kBadChunkLse;
      continue;
    }
    const std::int64_t orow = r.qo_begin + row.token;
    ptx::st_v4(static_cast<TO*>(p.o) + orow * p.o_stride_n + row.head * p.o_stride_h + (i % kChunks) * (16 / int(sizeof(TO))),
               make_uint4(0, 0, 0, 0));
    if (p.lse != nullptr && i % kChunks == 0) p.lse[orow * p.lse_stride_n + row.head * p.lse_stride_h] = -INFINITY;
  }
}

}  // namespace kvinfer::cuda
