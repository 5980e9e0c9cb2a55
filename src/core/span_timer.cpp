// SPDX-License-Identifier: Apache-2.0
#include "core/span_timer.hpp"

#include <string>

#include "backend/backend.hpp"
#include "core/check.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer::detail {

SpanTimer::SpanTimer(Device device, int kinds, Stream stream)
    : device_(device), backend_(&backend_for(device)), stream_(stream), seconds_(std::size_t(kinds), 0.0) {
  require(!device.is_cuda() || cuda_backend_built(), "SpanTimer", "device", to_string(device),
          "the CUDA backend is not built");
}

SpanTimer::~SpanTimer() {
  for (auto [start, stop] : events_) {
    backend_->destroy_event(start);
    backend_->destroy_event(stop);
  }
}

void SpanTimer::begin(int kind) {
  if (open_ >= 0 || kind < 0 || std::size_t(kind) >= seconds_.size()) {
    throw Error("SpanTimer::begin", "kind", std::to_string(kind),
                open_ >= 0 ? "a span is open" : "must be in [0, " + std::to_string(seconds_.size()) + ")");
  }
  open_ = kind;
  if (device_.is_cuda()) {
    if (kinds_.size() == events_.size()) {
      events_.emplace_back(backend_->create_event(device_.index, /*timing=*/true),
                           backend_->create_event(device_.index, /*timing=*/true));
    }
    backend_->record_event(events_[kinds_.size()].first, stream_);
    kinds_.push_back(kind);
    return;
  }
  started_ = std::chrono::steady_clock::now();
}

void SpanTimer::end() {
  if (open_ < 0) throw Error("SpanTimer::end", "span", "none", "no span is open");
  if (device_.is_cuda()) {
    backend_->record_event(events_[kinds_.size() - 1].second, stream_);
    open_ = -1;
    return;
  }
  seconds_[std::size_t(open_)] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  open_ = -1;
}

std::vector<double> SpanTimer::collect() {
  if (open_ >= 0) throw Error("SpanTimer::collect", "span", std::to_string(open_), "a span is still open");
  if (!kinds_.empty()) {
    backend_->event_synchronize(
        events_[kinds_.size() - 1].second);  // stream order: every span before it is done
    for (std::size_t i = 0; i < kinds_.size(); ++i) {
      seconds_[std::size_t(kinds_[i])] +=
          1e-3 * double(backend_->elapsed_ms(events_[i].first, events_[i].second));
    }
    kinds_.clear();
  }
  std::vector<double> out(seconds_.size(), 0.0);
  std::swap(out, seconds_);
  return out;
}

}  // namespace kvinfer::detail
