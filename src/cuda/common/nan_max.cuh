// SPDX-License-Identifier: Apache-2.0
// The maximum that keeps a NaN: the merges of attention states take their reference
// LSE with it, so that a NaN state makes the merged row NaN (the rule of
// kvinfer/attention/options.hpp) rather than weigh nothing, as it would under fmaxf,
// which drops a NaN operand.
#pragma once

namespace kvinfer::cuda {

// max.NaN.f32 (sm_80 on): the larger of a and b, NaN if either is.
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

}  // namespace kvinfer::cuda
