// SPDX-License-Identifier: Apache-2.0
#include "kvinfer/core/device.hpp"

#include <fmt/format.h>

#ifdef KVINFER_WITH_CUDA
#include "cuda/runtime.hpp"
#endif

namespace kvinfer {

std::string to_string(Device d) {
  return d.is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", d.index);
}

bool cuda_backend_built() {
#ifdef KVINFER_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef KVINFER_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

Device default_device() { return cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu(); }

}  // namespace kvinfer
