// SPDX-License-Identifier: Apache-2.0
// Host tensors the benchmarks build their plans from (index arrays live on the host
// for plan(); the caller copies them to the device where run() reads them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer::bench {

inline Tensor host_i32(const std::vector<std::int32_t>& values) {
  Tensor t = Tensor::empty({std::int64_t(values.size())}, DType::kI32);
  std::copy(values.begin(), values.end(), t.data_as<std::int32_t>());
  return t;
}

}  // namespace kvinfer::bench
