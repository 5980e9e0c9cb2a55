// SPDX-License-Identifier: Apache-2.0
// The instruction set the CPU backend's vectorised loops use, chosen once at run
// time from what the processor supports ($KVINFER_CPU_ISA=portable forces the
// portable loops, e.g. to test them on an AVX2 machine).
#pragma once

#include <string_view>

namespace kvinfer::cpu {

enum class CpuIsa {
  kPortable,  // plain C++, any processor
  kAvx2,      // AVX2 + FMA + F16C (x86-64, Haswell / Zen and later)
};

std::string_view cpu_isa_name(CpuIsa isa);

// What this processor supports, ignoring the environment.
CpuIsa detect_cpu_isa();

// What the backend uses: detect_cpu_isa(), unless $KVINFER_CPU_ISA asks for less.
CpuIsa cpu_isa();

}  // namespace kvinfer::cpu
