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

// Side streams and events, for work that forks from a caller's stream and joins it
// again: a non-blocking stream (no implicit order with the legacy default stream)
// and events without timing. Recording and waiting are legal during CUDA-graph
// capture, where they add the side stream's work to the captured graph.
using Event = void*;
Stream create_stream(int device);
void destroy_stream(Stream stream);
Event create_event(int device);
void destroy_event(Event event);
void record_event(Event event, Stream stream);
void stream_wait_event(Stream stream, Event event);
// Events that keep a timestamp, for the device time between two records on a stream.
Event create_timing_event(int device);
void event_synchronize(Event event);
float elapsed_ms(Event start, Event stop);  // both recorded and complete

}  // namespace kvinfer::cuda
