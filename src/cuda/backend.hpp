// SPDX-License-Identifier: Apache-2.0
// The CUDA backend behind the one backend interface (src/backend/backend.hpp).
// Included only by the registry.
#pragma once

#include "backend/backend.hpp"

namespace kvinfer::cuda {

const detail::Backend& backend();

}  // namespace kvinfer::cuda
