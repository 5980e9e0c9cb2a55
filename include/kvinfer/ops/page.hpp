// SPDX-License-Identifier: Apache-2.0
// Operations on paged KV caches: append new tokens, and the index helpers that
// prepare an append.
#pragma once

#include <cstdint>

#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/mla_cache.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer {

// Writes token t of append_key/append_value ([nnz, num_kv_heads, head_dim], any
// strides with a contiguous last dim, same dtype as the cache) to page
// table.indices[table.indptr[b] + p / page_size], slot p % page_size, where
// b = batch_indices[t] and p = positions[t]. The page table must already cover the
// new tokens. Runs on the device of the cache; every tensor must be there.
void append_paged_kv_cache(const TensorView& append_key, const TensorView& append_value,
                           const TensorView& batch_indices, const TensorView& positions,
                           const PagedKVCache& cache, const PageTable& table, Stream stream = nullptr);

// The same for the MLA cache: append_ckv [nnz, head_dim_ckv], append_kpe [nnz, head_dim_kpe].
void append_paged_mla_kv_cache(const TensorView& append_ckv, const TensorView& append_kpe,
                               const TensorView& batch_indices, const TensorView& positions,
                               const MLACache& cache, const PageTable& table, Stream stream = nullptr);

// For each appended token t (append_indptr [batch_size + 1], seq_lens [batch_size],
// both int32): batch_indices[t] = its request b and positions[t] =
// seq_lens[b] - append_len[b] + (t - append_indptr[b]), i.e. the appended tokens are
// the tail of the (already extended) sequence. Outputs are int32 [nnz].
void get_batch_indices_positions(const TensorView& append_indptr, const TensorView& seq_lens,
                                 const TensorView& batch_indices, const TensorView& positions,
                                 Stream stream = nullptr);

// seq_lens[i] = (indptr[i+1] - indptr[i] - 1) * page_size + last_page_len[i], and 0 for
// a request without pages. Output int32 [batch_size].
void get_seq_lens(const TensorView& kv_indptr, const TensorView& kv_last_page_len,
                  std::int64_t page_size, const TensorView& seq_lens, Stream stream = nullptr);

}  // namespace kvinfer
