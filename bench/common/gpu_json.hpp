// SPDX-License-Identifier: Apache-2.0
// JSON forms of the measuring tools' results (host code only: nvcc never sees
// nlohmann/json here).
#pragma once

#include <nlohmann/json.hpp>

#include "bench/common/gpu_bench.hpp"

namespace kvinfer::bench {

inline nlohmann::json to_json(const Timing& t) {
  return {{"median_us", t.median_us},
          {"min_us", t.min_us},
          {"p10_us", t.p10_us},
          {"p90_us", t.p90_us},
          {"runs", t.runs}};
}

inline nlohmann::json to_json(const Ceiling& c) {
  return {{"name", c.name},
          {"value", c.value},
          {"unit", c.unit},
          {"detail", c.detail},
          {"timing", to_json(c.timing)}};
}

inline nlohmann::json to_json(const DeviceInfo& d) {
  return {{"name", d.name},         {"sm_count", d.sm_count},
          {"l2_bytes", d.l2_bytes}, {"cc", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
          {"driver", d.driver},     {"runtime", d.runtime},
          {"mem_gib", d.mem_gib}};
}

}  // namespace kvinfer::bench
