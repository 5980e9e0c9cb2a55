// SPDX-License-Identifier: Apache-2.0
// Where a tensor's memory lives and where a wrapper runs.
#pragma once

#include <string>

namespace kvinfer {

enum class DeviceType { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // GPU ordinal; 0 for the CPU

  static constexpr Device cpu() { return {DeviceType::kCPU, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  constexpr bool is_cpu() const { return type == DeviceType::kCPU; }
  constexpr bool is_cuda() const { return type == DeviceType::kCUDA; }
  friend constexpr bool operator==(Device, Device) = default;
};

std::string to_string(Device d);  // "cpu", "cuda:0"

// The backends compiled into this build and the GPUs visible at run time.
bool cuda_backend_built();
int cuda_device_count();  // 0 when the backend is not built or no GPU is present

// The default device of programs: cuda:0 when the CUDA backend is built and a GPU
// is found, the CPU otherwise.
Device default_device();

// An opaque stream handle (a cudaStream_t on CUDA); the CPU backend ignores it.
using Stream = void*;

}  // namespace kvinfer
