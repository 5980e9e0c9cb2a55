// SPDX-License-Identifier: Apache-2.0
// The paged KV cache in CSR form: page storage (one 5-D tensor or a K/V pair, NHD or
// HND, any strides with a contiguous last dim) and the page table that maps each
// request to its pages.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/kv_layout.hpp"

namespace kvinfer {

// Page storage. k and v are 4-D views:
//   NHD [max_pages, page_size, num_kv_heads, head_dim]
//   HND [max_pages, num_kv_heads, page_size, head_dim]
// They may have different strides (a 5-D tensor gives two views 1 slot apart).
struct PagedKVCache {
  TensorView k;
  TensorView v;
  KVLayout layout = KVLayout::kNHD;

  // One 5-D tensor: NHD [max_pages, 2, page_size, H, D] / HND [max_pages, 2, H, page_size, D];
  // index 0 of dim 1 is K, 1 is V. Throws kvinfer::Error on a bad shape.
  static PagedKVCache combined(const TensorView& kv_cache, KVLayout layout = KVLayout::kNHD);
  // A pair of 4-D tensors of equal shape, dtype and device.
  static PagedKVCache pair(const TensorView& k, const TensorView& v, KVLayout layout = KVLayout::kNHD);

  std::int64_t num_pages() const { return k.size(0); }
  std::int64_t page_size() const { return k.size(layout == KVLayout::kNHD ? 1 : 2); }
  std::int64_t num_heads() const { return k.size(layout == KVLayout::kNHD ? 2 : 1); }
  std::int64_t head_dim() const { return k.size(3); }
  DType dtype() const { return k.dtype(); }
  Device device() const { return k.device(); }
};

// Element strides of one page-storage view, independent of the layout.
struct PageStrides {
  std::int64_t page;
  std::int64_t token;
  std::int64_t head;
};
PageStrides page_strides(const TensorView& kv, KVLayout layout);

// The CSR page table. All arrays int32 and contiguous.
struct PageTable {
  TensorView indptr;         // [batch_size + 1]: pages of request i are indices[indptr[i]:indptr[i+1]]
  TensorView indices;        // [>= indptr[batch_size]]: page ids in [0, max_pages)
  TensorView last_page_len;  // [batch_size]: tokens in the last page, in [1, page_size]; 0 iff no pages

  std::int64_t batch_size() const { return indptr.size(0) - 1; }
};

// Checks the storage (rank 4, equal shapes/dtypes/devices for k and v, last dim
// contiguous, page_size >= 1).
void validate_paged_kv_cache(std::string_view op, const PagedKVCache& cache);

// Checks the arrays of a page table: int32, rank 1, contiguous, consistent
// lengths, all on `device`.
void validate_page_table_arrays(std::string_view op, const PageTable& table, Device device);

// Checks the contents of a page table held on the host and returns kv_len per
// request: kv_len[i] = (pages_i - 1) * page_size + last_page_len[i], 0 for a request
// with no pages. Rejects a decreasing indptr, page ids outside [0, num_pages),
// last_page_len outside [1, page_size] for a non-empty request, and a non-zero
// last_page_len for an empty one. num_pages < 0 skips the page-id check.
std::vector<std::int32_t> kv_lens_from_page_table(std::string_view op, const PageTable& table_host,
                                                  std::int64_t page_size, std::int64_t num_pages);

}  // namespace kvinfer
