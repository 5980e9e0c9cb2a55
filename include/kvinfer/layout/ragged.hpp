// SPDX-License-Identifier: Apache-2.0
// Ragged tensors: the rows of all requests packed without padding, with an int32
// indptr. Request i owns rows [indptr[i], indptr[i+1]).
#pragma once

#include <cstdint>
#include <vector>

#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/kv_layout.hpp"

namespace kvinfer {

struct RaggedTensor {
  TensorView data;    // NHD [nnz, num_heads, head_dim]; HND [num_heads, nnz, head_dim] (KV only)
  TensorView indptr;  // [batch_size + 1] int32, indptr[0] == 0, non-decreasing
  KVLayout layout = KVLayout::kNHD;

  std::int64_t nnz() const { return data.size(layout == KVLayout::kNHD ? 0 : 1); }
  std::int64_t num_heads() const { return data.size(layout == KVLayout::kNHD ? 1 : 0); }
  std::int64_t head_dim() const { return data.size(2); }
  std::int64_t stride_token() const { return data.stride(layout == KVLayout::kNHD ? 0 : 1); }
  std::int64_t stride_head() const { return data.stride(layout == KVLayout::kNHD ? 1 : 0); }
};

// Checks a ragged tensor (rank 3, last dim contiguous, int32 indptr whose last
// entry equals nnz when `indptr` is on the host) and throws kvinfer::Error otherwise.
void validate_ragged(std::string_view op, std::string_view name, const RaggedTensor& t);

// Per-request lengths indptr[i+1] - indptr[i] of a host int32 indptr, after
// checking it starts at 0 and never decreases.
std::vector<std::int32_t> lengths_from_indptr(std::string_view op, std::string_view name,
                                              const TensorView& indptr_host);

}  // namespace kvinfer
