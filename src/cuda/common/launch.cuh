// SPDX-License-Identifier: Apache-2.0
// Launch helpers shared by the kernels of the CUDA backend: the stream handle, grid
// sizing for flat grid-stride kernels, the post-launch check, and programmatic
// dependent launches.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cuda/check.cuh"
#include "kvinfer/core/device.hpp"

namespace kvinfer::cuda {

inline cudaStream_t to_cuda_stream(Stream s) {
  return static_cast<cudaStream_t>(s);
}

// Every launch is followed by this: launch-configuration errors surface here, at the
// call that caused them, rather than at a later unrelated call.
#define KVINFER_CUDA_CHECK_LAUNCH() KVINFER_CUDA_CHECK(cudaGetLastError())

// Blocks for `work` independent items of `per_block` each (at least one block), capped
// for grid-stride kernels.
inline unsigned grid_for(std::int64_t work, int per_block, std::int64_t cap = (std::int64_t(1) << 31) - 1) {
  const std::int64_t blocks = (work + per_block - 1) / per_block;
  return unsigned(std::clamp<std::int64_t>(blocks, 1, cap));
}

// Launches kernel<<<grid, block, smem, stream>>>(args...), as a programmatic
// dependent launch when `programmatic`: the kernel may then start while the
// previous kernel on the stream finishes, so its code must wait for that kernel's
// results first (griddepcontrol.wait, sm_90 on; see hopper_device). This hides the
// gap between a short kernel and the one it follows.
template <class... Params, class... Args>
void launch_after_previous(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                           bool programmatic, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = programmatic ? 1 : 0;
  KVINFER_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// In a kernel launched by launch_after_previous, before its first access to what the
// previous kernel writes: waits until that kernel has completed and its writes are
// visible (a no-op otherwise).
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the kernel after this one on the stream, where it is a programmatic dependent
// launch, start now rather than when every CTA of this grid has exited: its CTAs take
// the slots this grid leaves and wait for this grid's results at
// wait_for_previous_kernel. Once every CTA of this grid has called it (or exited), so
// a grid of several waves releases its successor as its last wave starts. A no-op
// where the next kernel is launched plainly.
__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace kvinfer::cuda
