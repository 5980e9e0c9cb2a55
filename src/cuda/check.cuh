// SPDX-License-Identifier: Apache-2.0
// Every CUDA runtime call goes through KVINFER_CUDA_CHECK: a failure becomes a
// kvinfer::Error naming the call and the CUDA error.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kvinfer/core/error.hpp"

#define KVINFER_CUDA_CHECK(call)                                                              \
  do {                                                                                        \
    const cudaError_t kvinfer_status_ = (call);                                               \
    if (kvinfer_status_ != cudaSuccess) {                                                     \
      throw ::kvinfer::Error("cuda", #call, cudaGetErrorName(kvinfer_status_),                \
                             std::string("CUDA call failed: ") + cudaGetErrorString(kvinfer_status_)); \
    }                                                                                         \
  } while (0)
