// SPDX-License-Identifier: Apache-2.0
// Device side of the device status (core/device_status.hpp): the bounds check of an
// index read from device memory on the hot path, and the record of the first bad
// value on the cold one.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/device_status.hpp"

namespace kvinfer::cuda {

// A page id checked against the cache's pages: the id, or page 0 with `bad` set. The
// substitute keeps every address in the cache; an item that read it discards its rows
// (the kernels' discard_bad_item), so what page 0 holds never reaches the output. One
// unsigned compare and a select: negative ids are huge unsigned values.
__device__ __forceinline__ std::int32_t checked_page(std::int32_t id, std::uint32_t num_pages, bool& bad) {
  const bool out = std::uint32_t(id) >= num_pages;
  bad |= out;
  return out ? 0 : id;
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

// The partial LSE of a split chunk that met a bad page id: no real chunk has it (a
// partial LSE is finite or -inf; an infinite logit gives -inf), and it is the
// maximum the merge takes first, which then writes the row as zeros with LSE -inf.
inline constexpr float kBadChunkLse = __builtin_huge_valf();

}  // namespace kvinfer::cuda
