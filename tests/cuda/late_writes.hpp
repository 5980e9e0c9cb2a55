// SPDX-License-Identifier: Apache-2.0
// Kernels of the programmatic-launch tests: a predecessor that lets its successor
// launch at once and writes (and reads) its buffers only later, and a successor that
// ignores the dependency, to show that the two really overlap.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>

namespace kvinfer::testing {

struct LateCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;  // both pointers 16-byte aligned
};

// Launches both kernels below once with nothing to do. With lazy module loading (the
// default), a kernel's first launch loads it, and a load waits for the kernels
// running: a first launch would never overlap the kernel before it.
void load_late_write_kernels();

// One kernel on `stream` that first lets a programmatic dependent launch
// (griddepcontrol.launch_dependents), then waits delay_us microseconds, then does
// every copy (at most 4): what a predecessor that writes q, the cache or the page
// table, or reads the last output, looks like to the kernel after it.
void launch_late_copies(std::span<const LateCopy> copies, int delay_us, cudaStream_t stream);

// A programmatic dependent launch on `stream` that copies at once, without waiting
// for the kernel before it: where that kernel is launch_late_copies, dst gets what
// src held before the late copies, which proves that the launches overlapped.
void launch_eager_copy(const LateCopy& copy, cudaStream_t stream);

}  // namespace kvinfer::testing
