// SPDX-License-Identifier: Apache-2.0
#include "cpu/isa.hpp"

#include <cstdlib>
#include <string>

#if defined(KVINFER_CPU_HAVE_AVX2) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace kvinfer::cpu {

std::string_view cpu_isa_name(CpuIsa isa) {
  return isa == CpuIsa::kAvx2 ? "avx2" : "portable";
}

CpuIsa detect_cpu_isa() {
#if defined(KVINFER_CPU_HAVE_AVX2) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  // F16C from CPUID leaf 1 (ECX bit 29): clang before 15 has no
  // __builtin_cpu_supports("f16c"). The AVX2 check covers the OS's saving of the
  // ymm registers, which F16C needs too.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) return CpuIsa::kAvx2;
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
