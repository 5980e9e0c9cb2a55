// SPDX-License-Identifier: Apache-2.0
// Where an attention kernel reads its keys and values: a paged cache (K and V page
// views, looked up through the page table) or ragged tensors (one key row per token
// of the request, from its kv_begin). The two are built as distinct types from the
// checked problem; the kernel sees one KVSource, asks it which it holds (paged()),
// and addresses both alike (kv_tensor.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/attention_params.hpp"
#include "cuda/params/kv_tensor.cuh"
#include "cuda/params/page_lookup.cuh"

namespace kvinfer::cuda {

struct PagedKV {
  KVTensor k, v;
  PageLookup pages;
};

struct RaggedKV {
  KVTensor k, v;
};

struct KVSource {
  KVTensor k, v;
  PageLookup pages;      // paged: the page ids and page size; ragged: none
  float v_scale = 1.0f;  // the value is v * v_scale (fp8 caches; k_scale is folded into the logits' scale)

  KVSource() = default;
  KVSource(const PagedKV& s, float v_scale_) : k(s.k), v(s.v), pages(s.pages), v_scale(v_scale_) {}
  KVSource(const RaggedKV& s, float v_scale_) : k(s.k), v(s.v), v_scale(v_scale_) {}

  // Which of the two it was made from. The page ids themselves say it (a RaggedKV has
  // none; a page table with no entries may have none either, and then no key is read
  // either way), rather than a separate tag: the
  // compiler then derives the item's key locator (KeyLocator) from one pointer, and
  // the mma.sync tiles keep the code they had before the parameters were composed
  // (a one-byte tag reordered the tensor-core tile's whole schedule).
  __host__ __device__ bool paged() const { return pages.page_ids != nullptr; }
};

inline KVSource kv_source(const detail::AttentionParams& p) {
  const detail::AttentionProblem& pr = p.problem;
  if (pr.storage == detail::KVStorage::kPaged) {
    const PagedKV paged{paged_kv_tensor(p.k, pr.layout), paged_kv_tensor(p.v, pr.layout),
                        page_lookup(p.kv_indices, pr.page_size, std::min(p.k.size(0), p.v.size(0)))};
    return {paged, p.v_scale};
  }
  return {RaggedKV{ragged_kv_tensor(p.k, pr.layout), ragged_kv_tensor(p.v, pr.layout)}, p.v_scale};
}

}  // namespace kvinfer::cuda
