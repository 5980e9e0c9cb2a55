// SPDX-License-Identifier: Apache-2.0
// Checked arguments of the non-attention operations, as handed from the public
// entry points (src/core) to a backend (src/cpu, src/cuda). A backend may assume
// everything documented here has been validated.
#pragma once

#include <cstdint>

#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/mask.hpp"
#include "kvinfer/layout/mla_cache.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer::detail {

struct AppendPagedKVParams {
  TensorView key, value;                // [nnz, num_kv_heads, head_dim], dtype == cache dtype
  TensorView batch_indices, positions;  // int32 [nnz]
  PagedKVCache cache;
  PageTable table;
  Stream stream = nullptr;
};

struct AppendPagedMLAParams {
  TensorView ckv, kpe;                  // [nnz, head_dim_ckv], [nnz, head_dim_kpe] (kpe absent iff 0)
  TensorView batch_indices, positions;  // int32 [nnz]
  MLACache cache;
  PageTable table;
  Stream stream = nullptr;
};

struct BatchIndicesPositionsParams {
  TensorView append_indptr;  // int32 [batch_size + 1]
  TensorView seq_lens;       // int32 [batch_size]
  TensorView batch_indices;  // int32 [nnz] out
  TensorView positions;      // int32 [nnz] out
  Stream stream = nullptr;
};

struct SeqLensParams {
  TensorView kv_indptr, kv_last_page_len;  // int32 [batch_size + 1], [batch_size]
  std::int64_t page_size;
  TensorView seq_lens;  // int32 [batch_size] out
  Stream stream = nullptr;
};

struct PackBitsParams {
  TensorView x;        // bool/uint8 [n], contiguous
  TensorView out;      // uint8 [ceil(n/8)]
  BitOrder order;
  Stream stream = nullptr;
};

struct SegmentPackBitsParams {
  TensorView x;                // bool/uint8 [indptr[batch_size]], contiguous
  TensorView indptr;           // int32 [batch_size + 1], on x's device
  TensorView out_indptr;       // int32 [batch_size + 1], byte offsets, on x's device
  TensorView out;              // uint8 [out_indptr[batch_size]]
  std::int64_t batch_size;
  BitOrder order;
  Stream stream = nullptr;
};

// One merge of two states, optionally in place with a row mask. v_out may alias v_a.
struct MergeStateParams {
  TensorView v_a, s_a, v_b, s_b;  // [n, H, D], [n, H] f32
  TensorView v_out, s_out;
  TensorView mask;                // bool/uint8 [n] or absent
  Stream stream = nullptr;
};

struct MergeStatesParams {
  TensorView v, s;          // [n, K, H, D], [n, K, H]
  TensorView v_out, s_out;  // [n, H, D], [n, H]
  Stream stream = nullptr;
};

}  // namespace kvinfer::detail
