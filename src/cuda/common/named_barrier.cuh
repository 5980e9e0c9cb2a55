// SPDX-License-Identifier: Apache-2.0
// Named CTA barriers (bar.sync / bar.arrive with an id and a thread count): a subset of
// the CTA's warps meets at barrier `kId` (1-15; 0 is __syncthreads) once `kThreads`
// threads have arrived. sync waits; arrive counts itself in and goes on, which lets one
// group of warps signal another without waiting for it.
#pragma once

namespace kvinfer::cuda::named_barrier {

template <int kId, int kThreads>
__device__ __forceinline__ void sync() {
  static_assert(kId > 0 && kId < 16 && kThreads % 32 == 0, "barriers 1-15, whole warps");
  asm volatile("bar.sync %0, %1;" ::"n"(kId), "n"(kThreads) : "memory");
}

template <int kId, int kThreads>
__device__ __forceinline__ void arrive() {
  static_assert(kId > 0 && kId < 16 && kThreads % 32 == 0, "barriers 1-15, whole warps");
  asm volatile("bar.arrive %0, %1;" ::"n"(kId), "n"(kThreads) : "memory");
}

// A run-time id (a warpgroup's own barrier, say): bar.sync takes it in a register.
template <int kThreads>
__device__ __forceinline__ void sync(int id) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(kThreads) : "memory");
}
template <int kThreads>
__device__ __forceinline__ void arrive(int id) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "n"(kThreads) : "memory");
}

}  // namespace kvinfer::cuda::named_barrier
