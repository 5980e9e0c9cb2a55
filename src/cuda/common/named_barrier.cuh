// SPDX-License-Identifier: Apache-2.0
// Named CTA barriers (bar.sync with an id and a thread count): a subset of the CTA's
// warps meets at barrier `kId` (1-15; 0 is __syncthreads) once `kThreads` threads have
// arrived, so that two warpgroups can meet while a third (a producer) runs on.
#pragma once

namespace kvinfer::cuda::named_barrier {

template <int kId, int kThreads>
__device__ __forceinline__ void sync() {
  static_assert(kId > 0 && kId < 16 && kThreads % 32 == 0, "barriers 1-15, whole warps");
  asm volatile("bar.sync %0, %1;" ::"n"(kId), "n"(kThreads) : "memory");
}

}  // namespace kvinfer::cuda::named_barrier
