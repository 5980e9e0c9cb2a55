// SPDX-License-Identifier: Apache-2.0
// The merge of split-KV partial states, shared by every attention kernel.
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/merge_params.cuh"
#include "kvinfer/core/dtype.hpp"

namespace kvinfer::cuda {

// max_chunks: the most chunks of one request (sizes the CTAs). fixed_order: every
// row's chunks summed in one order whatever the launch (a fixed split size: batch
// invariance). programmatic: launch as a programmatic dependent of the attention
// kernel before it on the stream (devices of compute capability 9.0 and later).
void launch_merge_partials(const MergeParams& p, DType o_dtype, int head_dim, std::int64_t grid,
                           int max_chunks, bool fixed_order, bool programmatic, cudaStream_t stream);

}  // namespace kvinfer::cuda
