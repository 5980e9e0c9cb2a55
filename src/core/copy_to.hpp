// SPDX-License-Identifier: Apache-2.0
// A contiguous copy of a view on another device, complete when it returns: for
// the few host reads of device arrays that validation needs (TensorView has no
// owning `to`).
#pragma once

#include "kvinfer/core/tensor.hpp"

namespace kvinfer::detail {

Tensor copy_to(const TensorView& t, Device device);

}  // namespace kvinfer::detail
