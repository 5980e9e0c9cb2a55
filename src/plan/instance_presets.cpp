// SPDX-License-Identifier: Apache-2.0
#include "plan/instance_presets.hpp"

#include <array>

namespace kvinfer::detail {

std::span<const InstancePreset> instance_presets() {
  static const std::array<InstancePreset, 3> presets = [] {
    std::array<InstancePreset, 3> p{InstancePreset{"minimal", {}}, InstancePreset{"default", {}},
                                    InstancePreset{"full", {}}};
    // The generated lines name a preset by its index here (cmake/KvinferInstances.cmake).
#define KVINFER_PRESET_INSTANCE(preset, family, q, kv, dqk, dvo) \
  p[preset].instances.push_back(AttentionInstance{KernelFamily::family, DType::q, DType::kv, dqk, dvo});
#include "instance_presets.inc"
#undef KVINFER_PRESET_INSTANCE
#define KVINFER_PRESET_MLA_INSTANCE(preset, q, kv) p[preset].mla.push_back(MlaInstance{DType::q, DType::kv});
#include "mla_instance_presets.inc"
#undef KVINFER_PRESET_MLA_INSTANCE
    return p;
  }();
  return presets;
}

}  // namespace kvinfer::detail
