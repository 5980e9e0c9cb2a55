// SPDX-License-Identifier: Apache-2.0
#include "kvinfer/core/device.hpp"

#include <fmt/format.h>

namespace kvinfer {

std::string to_string(Device d) {
  return d.is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", d.index);
}

// cuda_backend_built() and cuda_device_count() are the backend registry's
// (src/backend/registry.cpp).

Device default_device() {
  return cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu();
}

}  // namespace kvinfer
