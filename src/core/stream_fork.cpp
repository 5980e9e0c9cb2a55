// SPDX-License-Identifier: Apache-2.0
#include "core/stream_fork.hpp"

#ifdef KVINFER_WITH_CUDA
#include "cuda/runtime.hpp"
#endif

namespace kvinfer::detail {

StreamFork::StreamFork(Device device) {
#ifdef KVINFER_WITH_CUDA
  if (device.is_cuda()) {
    side_ = cuda::create_stream(device.index);
    forked_ = cuda::create_event(device.index);
    joined_ = cuda::create_event(device.index);
  }
#else
  (void)device;
#endif
}

StreamFork::~StreamFork() {
#ifdef KVINFER_WITH_CUDA
  if (side_) {
    cuda::destroy_event(joined_);
    cuda::destroy_event(forked_);
    cuda::destroy_stream(side_);
  }
#endif
}

Stream StreamFork::fork(Stream origin) {
#ifdef KVINFER_WITH_CUDA
  if (side_) {
    cuda::record_event(forked_, origin);
    cuda::stream_wait_event(side_, forked_);
    return side_;
  }
#endif
  return origin;
}

void StreamFork::join(Stream origin) {
#ifdef KVINFER_WITH_CUDA
  if (side_) {
    cuda::record_event(joined_, side_);
    cuda::stream_wait_event(origin, joined_);
  }
#else
  (void)origin;
#endif
}

}  // namespace kvinfer::detail
