// SPDX-License-Identifier: Apache-2.0
// The device status: where a GPU kernel records the first bad value it met in an
// index array that lives in device memory (page ids: the MLA kernel always, the other
// attention kernels in builds with KVINFER_DEVICE_INDEX_CHECKS), so that a serving
// loop learns of it without a synchronisation on the hot path. The kernel never
// dereferences the bad value; the host reads the status at a point of its choosing
// (the checked mode, a wrapper's status()).
//
// The layout is shared by host and device code: 32 bytes, written by the kernel that
// wins the compare-and-swap of `array` from kNone, read and cleared by the host.
#pragma once

#include <cstdint>

namespace kvinfer::detail {

// Whether the attention kernels other than MLA check page ids on the device (the
// CMake option KVINFER_DEVICE_INDEX_CHECKS). Without it, their kernels are compiled
// as if the checks were not there, and the checked mode checks the page ids on the
// host before the kernels instead.
#if defined(KVINFER_DEVICE_INDEX_CHECKS)
inline constexpr bool kDeviceIndexChecks = true;
#else
inline constexpr bool kDeviceIndexChecks = false;
#endif

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
