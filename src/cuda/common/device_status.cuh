// SPDX-License-Identifier: Apache-2.0
// Device side of the device status (core/device_status.hpp): the bounds check of an
// index read from device memory on the hot path, and the record of the first bad
// value on the cold one.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/device_status.hpp"

namespace kvinfer::cuda {

// A page id as a kernel uses it: clamped into the cache (a bad id becomes the last
// page, num_pages >= 1 by the host's check), with the largest id seen so far kept in
// `seen`, compared with num_pages once, after the item (bad_page_seen). The clamp keeps
// every address in the cache; an item that used a clamped id discards its rows
// (mla_discard_bad_item), so what the substitute page holds never reaches the output. Two unsigned min/max (a negative id is a huge unsigned value) and no
// predicate: kernels that load page ids ahead apply it where they use the id, so the
// look-ahead still hides the load.
__device__ __forceinline__ std::int32_t checked_page(std::int32_t id, std::uint32_t num_pages, std::uint32_t& seen) {
  seen = max(seen, std::uint32_t(id));
  return std::int32_t(min(std::uint32_t(id), num_pages - 1));
}
__device__ __forceinline__ bool bad_page_seen(std::uint32_t seen, std::uint32_t num_pages) {
  return seen >= num_pages;
}

// Records a bad value unless one is recorded already: the first to swap `array` from
// kNone writes the rest. Kept out of line: it runs only for bad input.
__device__ __noinline__ inline void record_bad_index(detail::DeviceStatus* status, detail::IndexArray array,
                                                     std::int32_t request, std::int64_t index, std::int64_t value,
                                                     std::int64_t limit) {
  if (status == nullptr) return;
  if (atomicCAS(&status->array, 0u, std::uint32_t(array)) != 0u) return;
  status->request = request;
  status->index = index;
  status->value = value;
  status->limit = limit;
}

// The first out-of-range page id among entries [first, last) of kv_indices (a work
// item's pages), recorded for request `request`. One thread's scan, on the cold path.
__device__ __noinline__ inline void record_bad_pages(detail::DeviceStatus* status, const std::int32_t* kv_indices,
                                                     std::int64_t first, std::int64_t last, std::uint32_t num_pages,
                                                     std::int32_t request) {
  for (std::int64_t e = first; e < last; ++e) {
    const std::int32_t id = kv_indices[e];
    if (std::uint32_t(id) >= num_pages) {
      record_bad_index(status, detail::IndexArray::kKvIndices, request, e, id, num_pages);
      return;
    }
  }
}

// The two above inlined, for the attention kernels: a call anywhere in the key-row
// tile made ptxas compile its main loop differently. Two copies on purpose: written
// once (the calls above wrapping these, or both through one scan helper), the MLA
// kernels' and the checked attention kernels' machine code changed from what was
// measured.
__device__ __forceinline__ void record_bad_index_inline(detail::DeviceStatus* status, detail::IndexArray array,
                                                        std::int32_t request, std::int64_t index, std::int64_t value,
                                                        std::int64_t limit) {
  if (status == nullptr) return;
  if (atomicCAS(&status->array, 0u, std::uint32_t(array)) != 0u) return;
  status->request = request;
  status->index = index;
  status->value = value;
  status->limit = limit;
}

__device__ __forceinline__ void record_bad_pages_inline(detail::DeviceStatus* status,
                                                        const std::int32_t* kv_indices, std::int64_t first,
                                                        std::int64_t last, std::uint32_t num_pages,
                                                        std::int32_t request) {
  for (std::int64_t e = first; e < last; ++e) {
    const std::int32_t id = kv_indices[e];
    if (std::uint32_t(id) >= num_pages) {
      record_bad_index_inline(status, detail::IndexArray::kKvIndices, request, e, id, num_pages);
      return;
    }
  }
}

// The partial LSE of a split chunk that met a bad page id: no real chunk has it (a
// partial LSE is finite or -inf; an infinite logit gives -inf), and it is the
// maximum the merge takes first, which then writes the row as zeros with LSE -inf.
inline constexpr float kBadChunkLse = __builtin_huge_valf();

}  // namespace kvinfer::cuda
