// SPDX-License-Identifier: Apache-2.0
// The few CUDA runtime services the core layer needs (memory, copies, device
// queries), behind plain C++ declarations so that core code needs no CUDA header.
// Defined in runtime.cu; only linked when the CUDA backend is built.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvinfer/core/device.hpp"

namespace kvinfer::cuda {

int device_count();
void* malloc_device(std::size_t bytes, int device);
void free_device(void* ptr, int device);
void* malloc_pinned(std::size_t bytes);
void free_pinned(void* ptr);
// Copies `bytes` between any two of host and device memory (cudaMemcpyDefault).
void memcpy_async(void* dst, const void* src, std::size_t bytes, Stream stream);
void memset_async(void* dst, int byte, std::size_t bytes, Stream stream);
void stream_synchronize(Stream stream);
int multiprocessor_count(int device);
// Whether `device` runs the Hopper (sm_90a) kernels this build compiled: their
// code may use sm_90 instructions, e.g. griddepcontrol.wait, which makes a kernel
// safe to launch programmatically (cudaLaunchAttributeProgrammaticStreamSerialization).
bool hopper_device(int device);

}  // namespace kvinfer::cuda
