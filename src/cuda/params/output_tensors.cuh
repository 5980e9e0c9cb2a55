// SPDX-License-Identifier: Apache-2.0
// A kernel's view of where its rows go: the output [nnz_q, H, D] and the optional
// float LSE [nnz_q, H], as first elements and element strides. The attention kernels,
// the MLA kernel and the merge of split-KV all write through it.
//
// The output's 16-bit type (fp16 or bf16) is a runtime field, not a template
// parameter: it changes no register, shared-memory or MMA shape, only the rounding
// of the final conversion, so one compiled kernel serves both (FlashInfer's
// o_data_type, independent of the query's type).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

#include "cuda/common/mma.cuh"
#include "kvinfer/core/tensor.hpp"

namespace kvinfer::cuda {

struct OutputTensors {
  void* o = nullptr;
  std::int64_t o_stride_n = 0, o_stride_h = 0;
  float* lse = nullptr;  // null: not asked for
  std::int64_t lse_stride_n = 0, lse_stride_h = 0;
  bool o_bf16 = false;  // o is bfloat16 (else float16; the merge also writes float32, by its own dispatch)
};

inline OutputTensors output_tensors(const TensorView& o, const TensorView& lse) {
  OutputTensors t{.o = o.data(), .o_stride_n = o.stride(0), .o_stride_h = o.stride(1)};
  t.o_bf16 = o.dtype() == DType::kBF16;
  if (lse.defined()) {
    t.lse = lse.data_as<float>();
    t.lse_stride_n = lse.stride(0);
    t.lse_stride_h = lse.stride(1);
  }
  return t;
}

// The first 16-bit element of (row, head) in o.
__device__ __forceinline__ std::uint16_t* output_row(const OutputTensors& t, std::int64_t row, std::int64_t head) {
  return static_cast<std::uint16_t*>(t.o) + row * t.o_stride_n + head * t.o_stride_h;
}

// Two output elements (lo first) rounded to nearest even into o's 16-bit type.
__device__ __forceinline__ std::uint32_t pack_output2(const OutputTensors& t, float lo, float hi) {
  return t.o_bf16 ? mma::pack2<__nv_bfloat16>(lo, hi) : mma::pack2<__half>(lo, hi);
}

// Eight output elements x[e] * scale as one 16-byte chunk (x[0] first).
__device__ __forceinline__ uint4 pack_output8(const OutputTensors& t, const float (&x)[8], float scale) {
  return make_uint4(pack_output2(t, x[0] * scale, x[1] * scale), pack_output2(t, x[2] * scale, x[3] * scale),
                    pack_output2(t, x[4] * scale, x[5] * scale), pack_output2(t, x[6] * scale, x[7] * scale));
}

}  // namespace kvinfer::cuda
