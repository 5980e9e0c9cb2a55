// SPDX-License-Identifier: Apache-2.0
#include "core/span_timer.hpp"

#include <string>

#include "kvinfer/core/error.hpp"

#ifdef KVINFER_WITH_CUDA
#include "cuda/runtime.hpp"
#endif

namespace kvinfer::detail {

SpanTimer::SpanTimer(Device device, int kinds, Stream stream)
    : device_(device), stream_(stream), seconds_(std::size_t(kinds), 0.0) {
#ifndef KVINFER_WITH_CUDA
  if (device.is_cuda())
    throw Error("SpanTimer", "device", to_string(device), "the CUDA backend is not built");
#endif
}

SpanTimer::~SpanTimer() {
#ifdef KVINFER_WITH_CUDA
  for (auto [start, stop] : events_) {
    cuda::destroy_event(start);
    cuda::destroy_event(stop);
  }
#endif
}

void SpanTimer::begin(int kind) {
  if (open_ >= 0 || kind < 0 || std::size_t(kind) >= seconds_.size()) {
    throw Error("SpanTimer::begin", "kind", std::to_string(kind),
                open_ >= 0 ? "a span is open" : "must be in [0, " + std::to_string(seconds_.size()) + ")");
  }
  open_ = kind;
#ifdef KVINFER_WITH_CUDA
  if (device_.is_cuda()) {
    if (kinds_.size() == events_.size()) {
      events_.emplace_back(cuda::create_timing_event(device_.index),
                           cuda::create_timing_event(device_.index));
    }
    cuda::record_event(events_[kinds_.size()].first, stream_);
    kinds_.push_back(kind);
    return;
  }
#endif
  started_ = std::chrono::steady_clock::now();
}

void SpanTimer::end() {
  if (open_ < 0) throw Error("SpanTimer::end", "span", "none", "no span is open");
#ifdef KVINFER_WITH_CUDA
  if (device_.is_cuda()) {
    cuda::record_event(events_[kinds_.size() - 1].second, stream_);
    open_ = -1;
    return;
  }
#endif
  seconds_[std::size_t(open_)] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  open_ = -1;
}

std::vector<double> SpanTimer::collect() {
  if (open_ >= 0) throw Error("SpanTimer::collect", "span", std::to_string(open_), "a span is still open");
#ifdef KVINFER_WITH_CUDA
  if (!kinds_.empty()) {
    cuda::event_synchronize(events_[kinds_.size() - 1].second);  // stream order: every span before it is done
    for (std::size_t i = 0; i < kinds_.size(); ++i) {
      seconds_[std::size_t(kinds_[i])] +=
          1e-3 * double(cuda::elapsed_ms(events_[i].first, events_[i].second));
    }
    kinds_.clear();
  }
#endif
  std::vector<double> out(seconds_.size(), 0.0);
  std::swap(out, seconds_);
  return out;
}

}  // namespace kvinfer::detail
