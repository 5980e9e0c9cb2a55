// SPDX-License-Identifier: Apache-2.0
// The index helpers that prepare an append: per appended token its request and
// position (get_batch_indices_positions), and per request its KV length from the
// page table (get_seq_lens).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/backend.hpp"
#include "cuda/common/launch.cuh"

namespace kvinfer::cuda {
namespace {

constexpr int kThreads = 128;

// One block per request: the block's threads walk the request's appended tokens,
// so no thread has to search for its request.
__global__ void __launch_bounds__(kThreads)
    batch_indices_positions_kernel(const std::int32_t* __restrict__ append_indptr,  // [batch_size + 1]
                                   const std::int32_t* __restrict__ seq_lens,       // [batch_size]
                                   std::int32_t* __restrict__ batch_indices,        // [nnz]
                                   std::int32_t* __restrict__ positions) {          // [nnz]
  const int b = blockIdx.x;
  const std::int32_t begin = append_indptr[b], end = append_indptr[b + 1];
  // The appended tokens are the tail of the (already extended) sequence.
  const std::int32_t first_pos = seq_lens[b] - (end - begin);
  for (std::int32_t t = begin + std::int32_t(threadIdx.x); t < end; t += kThreads) {
    batch_indices[t] = b;
    positions[t] = first_pos + (t - begin);
  }
}

__global__ void __launch_bounds__(kThreads)
    seq_lens_kernel(const std::int32_t* __restrict__ kv_indptr,         // [batch_size + 1]
                    const std::int32_t* __restrict__ kv_last_page_len,  // [batch_size]
                    std::int32_t page_size, std::int32_t batch_size,
                    std::int32_t* __restrict__ seq_lens) {  // [batch_size]
  const std::int32_t b = std::int32_t(blockIdx.x * kThreads + threadIdx.x);
  if (b >= batch_size) return;
  const std::int32_t pages = kv_indptr[b + 1] - kv_indptr[b];
  seq_lens[b] = pages == 0 ? 0 : (pages - 1) * page_size + kv_last_page_len[b];
}

}  // namespace

void CudaBackend::get_batch_indices_positions(const detail::BatchIndicesPositionsParams& p) const {
  const std::int64_t batch_size = p.append_indptr.size(0) - 1;
  if (batch_size <= 0 || p.batch_indices.size(0) == 0) return;
  batch_indices_positions_kernel<<<unsigned(batch_size), kThreads, 0, to_cuda_stream(p.stream)>>>(
      p.append_indptr.data_as<const std::int32_t>(), p.seq_lens.data_as<const std::int32_t>(),
      p.batch_indices.data_as<std::int32_t>(), p.positions.data_as<std::int32_t>());
  KVINFER_CUDA_CHECK_LAUNCH();
}

void CudaBackend::get_seq_lens(const detail::SeqLensParams& p) const {
  const std::int64_t batch_size = p.kv_indptr.size(0) - 1;
  if (batch_size <= 0) return;
  seq_lens_kernel<<<grid_for(batch_size, kThreads), kThreads, 0, to_cuda_stream(p.stream)>>>(
      p.kv_indptr.data_as<const std::int32_t>(), p.kv_last_page_len.data_as<const std::int32_t>(),
      std::int32_t(p.page_size), std::int32_t(batch_size), p.seq_lens.data_as<std::int32_t>());
  KVINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace kvinfer::cuda
