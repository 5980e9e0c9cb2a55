// SPDX-License-Identifier: Apache-2.0
#include "plan/instance_presets.hpp"

#include <array>

namespace kvinfer::detail {

std::span<const InstancePreset> instance_presets() {
  static const std::array<InstancePreset, 3> presets = [] {
    std::array<InstancePreset, 3> p{InstancePreset{"minimal", {}}, InstancePreset{"default", {}},
                                    InstancePreset{"full", {}}};
    const auto add = [&](std::string_view preset, AttentionInstance inst) {
      for (InstancePreset& e : p) {
        if (e.name == preset) e.instances.push_back(inst);
      }
    };
#define KVINFER_PRESET_INSTANCE(preset, family, q, kv, dqk, dvo) \
  add(#preset, AttentionInstance{KernelFamily::family, DType::q, DType::kv, dqk, dvo});
#include "instance_presets.inc"
#undef KVINFER_PRESET_INSTANCE
    return p;
  }();
  return presets;
}

}  // namespace kvinfer::detail
