// SPDX-License-Identifier: Apache-2.0
// Build information: version, compiled backends, kernel instance preset.
#pragma once

#include <string>

namespace kvinfer {

std::string version();
std::string instance_preset();  // "minimal", "default" or "full"; "none" without CUDA

}  // namespace kvinfer
