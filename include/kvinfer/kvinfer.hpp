// SPDX-License-Identifier: Apache-2.0
// Umbrella header: the whole public API.
#pragma once

#include "kvinfer/core/device.hpp"
#include "kvinfer/core/dtype.hpp"
#include "kvinfer/core/error.hpp"
#include "kvinfer/core/tensor.hpp"
#include "kvinfer/version.hpp"
