// SPDX-License-Identifier: Apache-2.0
// KVINFER_HD marks functions shared by host code and CUDA kernels.
#pragma once

#if defined(__CUDACC__)
#define KVINFER_HD __host__ __device__ __forceinline__
#else
#define KVINFER_HD inline
#endif
