// SPDX-License-Identifier: Apache-2.0
// The attention instances of every instance preset (cmake/KvinferInstances.cmake),
// whichever this build compiled: what the selector's error consults to name the
// preset that has a kernel for a configuration.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "plan/attention_selector.hpp"
#include "plan/mla_selector.hpp"

namespace kvinfer::detail {

struct InstancePreset {
  std::string_view name;  // minimal, default, full: smallest first
  std::vector<AttentionInstance> instances;
  std::vector<MlaInstance> mla;
};

std::span<const InstancePreset> instance_presets();

}  // namespace kvinfer::detail
