// SPDX-License-Identifier: Apache-2.0
// The CUDA-core decode family's instance API (family.hpp): items of 1, 2, 4 or 8
// query rows (the key's launch_rows), one CTA of kDecodeThreads per item.
#pragma once

#include <string>

#include "cuda/attention/cuda_core_decode/kernel.cuh"
#include "cuda/attention/family.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda::cuda_core_decode {

// Calls f with the kernel of an item tile of up to `rows` query rows.
template <class TQ, class TKV, int D, class F>
void with_kernel(int rows, F&& f) {
  switch (rows) {
    case 1: return f(decode_kernel<TQ, TKV, D, 1>);
    case 2: return f(decode_kernel<TQ, TKV, D, 2>);
    case 4: return f(decode_kernel<TQ, TKV, D, 4>);
    default: return f(decode_kernel<TQ, TKV, D, 8>);
  }
}

template <class TQ, class TKV, int DQK, int DVO>
void launch(const AttentionKernelParams& p, const detail::KernelKey& key, std::int64_t grid, cudaStream_t stream) {
  static_assert(DQK == DVO, "one head dim");
  if (p.item_warps > 1) {
    throw Error("attention", "item_warps", std::to_string(p.item_warps),
                "the CUDA-core decode kernel runs one warp group per item (a selector bug)");
  }
  with_kernel<TQ, TKV, DQK>(key.launch_rows, [&](auto kernel) {
    launch_after_previous(kernel, dim3(static_cast<unsigned>(grid)), kDecodeThreads, 0, stream, p.programmatic, p);
  });
}

template <class TQ, class TKV, int DQK, int DVO>
int occupancy(const detail::KernelKey& key) {
  int blocks = 0;
  with_kernel<TQ, TKV, DQK>(key.launch_rows, [&](auto kernel) {
    KVINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kDecodeThreads, 0));
  });
  return blocks;
}

template <class TQ, class TKV, int DQK, int DVO>
int max_item_warps(const detail::KernelKey&) {
  return 1;
}

}  // namespace kvinfer::cuda::cuda_core_decode
