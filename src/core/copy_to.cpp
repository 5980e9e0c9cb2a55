// SPDX-License-Identifier: Apache-2.0
#include "core/copy_to.hpp"

#ifdef KVINFER_WITH_CUDA
#include "cuda/runtime.hpp"
#endif

namespace kvinfer::detail {

Tensor copy_to(const TensorView& t, Device device) {
  Tensor out = Tensor::empty(t.shape(), t.dtype(), device);
  copy(out, t);
#ifdef KVINFER_WITH_CUDA
  // copy() is asynchronous between a GPU and the host; callers read the result at once.
  if (!device.is_cpu() || !t.device().is_cpu()) cuda::stream_synchronize(nullptr);
#endif
  return out;
}

}  // namespace kvinfer::detail
