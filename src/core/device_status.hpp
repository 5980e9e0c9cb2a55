// SPDX-License-Identifier: Apache-2.0
// The device status: where a GPU kernel records the first bad value it met in an
// index array that lives in device memory (the MLA kernel: page ids), so that a
// serving loop learns of it without a synchronisation on the hot path. The kernel
// never dereferences the bad value; the host reads the status at a point of its
// choosing (MLARunOptions::check_indices, BatchMLAPagedAttention::status()).
//
// The layout is shared by host and device code: 32 bytes, written by the kernel that
// wins the compare-and-swap of `array` from kNone, read and cleared by the host.
#pragma once

#include <cstdint>

namespace kvinfer::detail {

// The index array a bad value came from (0: none recorded).
enum class IndexArray : std::uint32_t {
  kNone = 0,
  kKvIndices = 1,  // a page id of the page table: [0, limit = pages of the cache)
};

struct DeviceStatus {
  std::uint32_t array = 0;    // IndexArray
  std::int32_t request = -1;  // the batch entry it belongs to, or -1
  std::int64_t index = 0;     // the element of the array
  std::int64_t value = 0;     // what it held
  std::int64_t limit = 0;     // the bound it broke (see IndexArray)
};
static_assert(sizeof(DeviceStatus) == 32, "the device writes it as laid out here");

}  // namespace kvinfer::detail
