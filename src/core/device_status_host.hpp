// SPDX-License-Identifier: Apache-2.0
// The host's side of the device status (core/device_status.hpp).
#pragma once

#include <optional>

#include "core/device_status.hpp"
#include "kvinfer/core/device.hpp"
#include "kvinfer/core/index_status.hpp"

namespace kvinfer::detail {

// What a status says, with the rule it broke.
IndexStatus describe(const DeviceStatus& s);

// Waits for `stream`, reads the status at `status` (device memory of `device`) and
// clears it when it holds a violation. The CPU, or no status: ok.
IndexStatus take_status(Device device, DeviceStatus* status, Stream stream);

// Whether run() reads its status after the kernels: the option, or by default
// KVINFER_CHECK_INDICES=1.
bool checked_run(const std::optional<bool>& check_indices);

}  // namespace kvinfer::detail
