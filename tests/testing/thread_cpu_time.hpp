// SPDX-License-Identifier: Apache-2.0
// Thread CPU time, for the planning-time budgets: the cost of the work itself on one
// core, unaffected by other processes sharing the machine (tests run in parallel).
#pragma once

#include <ctime>
#include <vector>

namespace kvinfer::testing {

// CPU time of the calling thread in microseconds.
inline double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) * 1e-3;
}

// The thread CPU time of each of `runs` calls of f, in microseconds.
template <class F>
std::vector<double> thread_cpu_times(int runs, F&& f) {
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) {
    const double t0 = thread_cpu_us();
    f();
    us.push_back(thread_cpu_us() - t0);
  }
  return us;
}

}  // namespace kvinfer::testing
