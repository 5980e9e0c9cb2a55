// SPDX-License-Identifier: Apache-2.0
// A kernel's view of a query tensor [nnz_q, H, D]: its first element and the element
// strides between tokens and heads (rows are contiguous). Attention has one (q), MLA
// two (q_nope, q_pe).
#pragma once

#include <cstdint>

#include "kvinfer/core/tensor.hpp"

namespace kvinfer::cuda {

struct QueryTensor {
  const void* data = nullptr;  // null: absent (MLA without a rotary part)
  std::int64_t stride_n = 0, stride_h = 0;
};

inline QueryTensor query_tensor(const TensorView& q) {
  if (!q.defined()) return {};
  return {q.data(), q.stride(0), q.stride(1)};
}

}  // namespace kvinfer::cuda
