// SPDX-License-Identifier: Apache-2.0
#include "kvinfer/version.hpp"

#include "kvinfer/core/device.hpp"

namespace kvinfer {

std::string version() { return KVINFER_VERSION; }

std::string instance_preset() { return cuda_backend_built() ? KVINFER_INSTANCE_PRESET : "none"; }

}  // namespace kvinfer
