// SPDX-License-Identifier: Apache-2.0
// A fixed pool of worker threads for the CPU backend. parallel_for hands out
// indices dynamically; which thread runs an index never changes a result, since
// every index writes its own outputs.
#pragma once

#include <cstdint>
#include <functional>

namespace kvinfer::cpu {

// Threads used by the CPU backend: $KVINFER_NUM_THREADS, else the hardware's.
int num_threads();
// Overrides the thread count (tests of thread-count invariance); 0 restores the default.
void set_num_threads(int n);

// Calls fn(i) for i in [0, n), spread over the pool; returns when all are done.
// An exception thrown by fn is rethrown here.
void parallel_for(std::int64_t n, const std::function<void(std::int64_t)>& fn);

}  // namespace kvinfer::cpu
