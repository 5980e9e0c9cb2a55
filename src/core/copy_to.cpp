// SPDX-License-Identifier: Apache-2.0
#include "core/copy_to.hpp"

#include "backend/backend.hpp"

namespace kvinfer::detail {

Tensor copy_to(const TensorView& t, Device device) {
  Tensor out = Tensor::empty(t.shape(), t.dtype(), device);
  copy(out, t);
  // copy() is asynchronous between a GPU and the host; callers read the result at once.
  if (!device.is_cpu()) backend_for(device).synchronize(nullptr);
  if (!t.device().is_cpu()) backend_for(t.device()).synchronize(nullptr);
  return out;
}

}  // namespace kvinfer::detail
