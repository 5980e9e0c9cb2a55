// SPDX-License-Identifier: Apache-2.0
#include "core/stream_fork.hpp"

#include "backend/backend.hpp"

namespace kvinfer::detail {

StreamFork::StreamFork(Device device) : backend_(&backend_for(device)) {
  side_ = backend_->create_stream(device.index);
  if (side_) {
    forked_ = backend_->create_event(device.index, /*timing=*/false);
    joined_ = backend_->create_event(device.index, /*timing=*/false);
  }
}

StreamFork::~StreamFork() {
  if (side_) {
    backend_->destroy_event(joined_);
    backend_->destroy_event(forked_);
    backend_->destroy_stream(side_);
  }
}

Stream StreamFork::fork(Stream origin) {
  if (!side_) return origin;
  backend_->record_event(forked_, origin);
  backend_->stream_wait_event(side_, forked_);
  return side_;
}

void StreamFork::join(Stream origin) {
  if (!side_) return;
  backend_->record_event(joined_, side_);
  backend_->stream_wait_event(origin, joined_);
}

}  // namespace kvinfer::detail
