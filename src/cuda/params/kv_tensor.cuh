// SPDX-License-Identifier: Apache-2.0
// A kernel's view of one tensor of keys or values (K, V; MLA's ckv, kpe): its first
// element and the element strides between pages, tokens and heads. A key row's
// address is data + (page * stride_page + slot * stride_token + head * stride_head)
// elements; a ragged tensor is one "page" (stride_page 0, slot = key row), so every
// kernel addresses both storages alike. The extents of the token and head dims are
// kept beside the strides for the kernels that copy by tensor maps (TMA), whose
// descriptors name them.
#pragma once

#include <cstdint>

#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/kv_layout.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer::cuda {

struct KVTensor {
  const void* data = nullptr;  // null: absent (MLA without a rotary part)
  std::int64_t stride_page = 0, stride_token = 0, stride_head = 0;
  std::int64_t tokens = 0, heads = 0;  // extents: token rows (of a page, or of the ragged tensor) and heads
};

// A page view of a paged cache ([pages, page_size, H, D] NHD / [pages, H, page_size, D]
// HND).
inline KVTensor paged_kv_tensor(const TensorView& t, KVLayout layout) {
  const PageStrides s = page_strides(t, layout);
  const bool nhd = layout == KVLayout::kNHD;
  return {t.data(), s.page, s.token, s.head, t.size(nhd ? 1 : 2), t.size(nhd ? 2 : 1)};
}

// A ragged tensor: NHD [nnz_kv, H, D] / HND [H, nnz_kv, D].
inline KVTensor ragged_kv_tensor(const TensorView& t, KVLayout layout) {
  const bool nhd = layout == KVLayout::kNHD;
  return {t.data(), 0, t.stride(nhd ? 0 : 1), t.stride(nhd ? 1 : 0), t.size(nhd ? 0 : 1), t.size(nhd ? 1 : 0)};
}

// MLA's latent caches: [pages, page_size, D], one head.
inline KVTensor latent_cache_tensor(const TensorView& t) {
  if (!t.defined()) return {};
  return {t.data(), t.stride(0), t.stride(1), 0};
}

}  // namespace kvinfer::cuda
