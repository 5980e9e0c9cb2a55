// SPDX-License-Identifier: Apache-2.0
// A side stream that forks from a caller's stream and joins it again, so that two
// independent pieces of work run concurrently on one device: the cascade's last
// level (bandwidth-bound decode over each request's own pages) next to its shared
// prefix level (tensor-core bound). fork(s) makes the side stream wait for what s
// has enqueued so far; join(s) makes s wait for what the side stream has enqueued
// since. Both are event records and waits: no host synchronisation, and legal
// inside CUDA-graph capture, where the side stream's work joins the graph.
// On the CPU there is no side stream: fork returns the caller's stream and join
// does nothing.
#pragma once

#include "kvinfer/core/device.hpp"

namespace kvinfer::detail {

class Backend;

class StreamFork {
 public:
  explicit StreamFork(Device device);
  ~StreamFork();
  StreamFork(const StreamFork&) = delete;
  StreamFork& operator=(const StreamFork&) = delete;

  // The stream to enqueue the forked work on.
  Stream fork(Stream origin);
  void join(Stream origin);

 private:
  const Backend* backend_;
  Stream side_ = nullptr;
  void* forked_ = nullptr;  // events (cudaEvent_t)
  void* joined_ = nullptr;
};

}  // namespace kvinfer::detail
