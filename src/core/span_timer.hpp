// SPDX-License-Identifier: Apache-2.0
// The device time of spans of work enqueued on a stream, without a host
// synchronisation per span: on a GPU, begin() and end() record timing events on the
// stream and collect() waits once, for the last of them; on the CPU, whose work runs
// in the calling thread, they read the host clock. `kvinfer serve` splits a step's
// attention time into append, prefill and decode with it: a round trip to the host
// after every kernel would count the launch and the copy back (about 10 µs each)
// into every span, and keep the kernels of a layer from following each other.
#pragma once

#include <chrono>
#include <utility>
#include <vector>

#include "kvinfer/core/device.hpp"

namespace kvinfer::detail {

class Backend;

class SpanTimer {
 public:
  // Spans are of `kinds` kinds (0 .. kinds - 1); their times add up per kind.
  SpanTimer(Device device, int kinds, Stream stream = nullptr);
  ~SpanTimer();
  SpanTimer(const SpanTimer&) = delete;
  SpanTimer& operator=(const SpanTimer&) = delete;

  void begin(int kind);  // opens a span (none may be open)
  void end();            // closes the open span
  // Seconds per kind of the spans closed since the last collect(); waits for the device.
  std::vector<double> collect();

 private:
  Device device_;
  const Backend* backend_;
  Stream stream_;
  std::vector<double> seconds_;
  int open_ = -1;  // the open span's kind
  // GPU: an event pair per span of the current collect() period, reused afterwards.
  std::vector<std::pair<void*, void*>> events_;
  std::vector<int> kinds_;                         // the kind of each recorded span
  std::chrono::steady_clock::time_point started_;  // CPU
};

}  // namespace kvinfer::detail
