// SPDX-License-Identifier: Apache-2.0
// What the planner knows about a device: how many processors run work items at
// once. A plain value, so the planner stays a pure function testable on the CPU
// with any device's profile.
#pragma once

#include <cstdint>

namespace kvinfer::detail {

struct DeviceProfile {
  int num_processors = 1;            // CPU threads, or GPU multiprocessors
  int work_items_per_processor = 1;  // resident at once (CPU 1; GPU CTAs per SM)

  std::int64_t concurrent_items() const { return std::int64_t(num_processors) * work_items_per_processor; }

  static DeviceProfile cpu(int threads) { return {threads, 1}; }
  // One H200: 132 SMs; attention kernels keep 2 CTAs per SM resident.
  static DeviceProfile h200() { return {132, 2}; }
};

}  // namespace kvinfer::detail
