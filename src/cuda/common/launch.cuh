// SPDX-License-Identifier: Apache-2.0
// Launch helpers shared by the kernels of the CUDA backend: the stream handle, grid
// sizing for flat grid-stride kernels, and the post-launch check.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

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

}  // namespace kvinfer::cuda
