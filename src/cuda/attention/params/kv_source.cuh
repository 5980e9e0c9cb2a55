// SPDX-License-Identifier: Apache-2.0
// Where an attention kernel reads its keys and values: a paged cache (K and V page
// views, looked up through the page table) or ragged tensors (one key row per token
// of the request, from its kv_begin). The two are built as distinct types from the
// checked problem; the kernel sees one KVSource that names which it holds, and
// addresses both alike (kv_tensor.cuh).
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
  PageLookup pages;      // paged only
  float v_scale = 1.0f;  // the value is v * v_scale (fp8 caches; k_scale is folded into the logits' scale)
  detail::KVStorage storage = detail::KVStorage::kRagged;

  KVSource() = default;
  KVSource(const PagedKV& s, float v_scale_)
      : k(s.k), v(s.v), pages(s.pages), v_scale(v_scale_), storage(detail::KVStorage::kPaged) {}
  KVSource(const RaggedKV& s, float v_scale_) : k(s.k), v(s.v), v_scale(v_scale_) {}

  __host__ __device__ bool paged() const { return storage == detail::KVStorage::kPaged; }
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
