// SPDX-License-Identifier: Apache-2.0
#include "cpu/isa.hpp"

#include <cstdlib>
#include <string>

namespace kvinfer::cpu {

std::string_view cpu_isa_name(CpuIsa isa) {
  return isa == CpuIsa::kAvx2 ? "avx2" : "portable";
}

CpuIsa detect_cpu_isa() {
#if defined(KVINFER_CPU_HAVE_AVX2) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return CpuIsa::kAvx2;
  }
#endif
  return CpuIsa::kPortable;
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = [] {
    const CpuIsa best = detect_cpu_isa();
    const char* env = std::getenv("KVINFER_CPU_ISA");
    if (env != nullptr && std::string(env) == "portable") return CpuIsa::kPortable;
    return best;
  }();
  return isa;
}

}  // namespace kvinfer::cpu
