// SPDX-License-Identifier: Apache-2.0
// A kernel's view of where its rows go: the output [nnz_q, H, D] and the optional
// float LSE [nnz_q, H], as first elements and element strides. The attention kernels,
// the MLA kernel and the merge of split-KV all write through it.
#pragma once

#include <cstdint>

#include "kvinfer/core/tensor.hpp"

namespace kvinfer::cuda {

struct OutputTensors {
  void* o = nullptr;
  std::int64_t o_stride_n = 0, o_stride_h = 0;
  float* lse = nullptr;  // null: not asked for
  std::int64_t lse_stride_n = 0, lse_stride_h = 0;
};

inline OutputTensors output_tensors(const TensorView& o, const TensorView& lse) {
  OutputTensors t{.o = o.data(), .o_stride_n = o.stride(0), .o_stride_h = o.stride(1)};
  if (lse.defined()) {
    t.lse = lse.data_as<float>();
    t.lse_stride_n = lse.stride(0);
    t.lse_stride_h = lse.stride(1);
  }
  return t;
}

}  // namespace kvinfer::cuda
