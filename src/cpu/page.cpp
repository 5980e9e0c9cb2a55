// SPDX-License-Identifier: Apache-2.0
// CPU backend of the page operations. Appends are byte copies of whole head rows,
// so one loop serves every dtype; all index arithmetic is in elements, in int64.
#include <algorithm>
#include <cstring>

#include "cpu/backend.hpp"
#include "cpu/thread_pool.hpp"

namespace kvinfer::cpu {
namespace {

char* bytes(const TensorView& t) {
  return static_cast<char*>(t.data());
}

// The page and the slot in it of token position `pos` of request `b`.
struct Slot {
  std::int64_t page;
  std::int64_t slot;
};

Slot slot_of(const PageTable& table, std::int32_t b, std::int32_t pos, std::int64_t page_size) {
  const auto* indptr = table.indptr.data_as<const std::int32_t>();
  const auto* indices = table.indices.data_as<const std::int32_t>();
  return {indices[indptr[b] + pos / page_size], pos % page_size};
}

// Calls token(t) for t in [0, nnz). Every token writes its own slot, so the order
// does not matter; a prefill-sized append is spread over the pool, while a decode
// step (a few tokens) stays on the caller's thread rather than waking the workers.
template <class F>
void for_each_token(std::int64_t nnz, F&& token) {
  constexpr std::int64_t kBlock = 64;
  if (nnz < 4 * kBlock) {
    for (std::int64_t t = 0; t < nnz; ++t) token(t);
    return;
  }
  parallel_for((nnz + kBlock - 1) / kBlock, [&](std::int64_t block) {
    const std::int64_t end = std::min(nnz, (block + 1) * kBlock);
    for (std::int64_t t = block * kBlock; t < end; ++t) token(t);
  });
}

}  // namespace

void CpuBackend::append_paged_kv_cache(const detail::AppendPagedKVParams& p) const {
  const PagedKVCache& cache = p.cache;
  const PageStrides ks = page_strides(cache.k, cache.layout);
  const PageStrides vs = page_strides(cache.v, cache.layout);
  const std::int64_t es = std::int64_t(cache.k.element_size());
  const std::int64_t num_heads = cache.num_heads();
  const std::size_t row_bytes = std::size_t(cache.head_dim() * es);
  const auto* batch = p.batch_indices.data_as<const std::int32_t>();
  const auto* pos = p.positions.data_as<const std::int32_t>();
  for_each_token(p.key.size(0), [&](std::int64_t t) {
    const Slot s = slot_of(p.table, batch[t], pos[t], cache.page_size());
    for (std::int64_t h = 0; h < num_heads; ++h) {
      std::memcpy(bytes(cache.k) + (s.page * ks.page + s.slot * ks.token + h * ks.head) * es,
                  bytes(p.key) + (t * p.key.stride(0) + h * p.key.stride(1)) * es, row_bytes);
      std::memcpy(bytes(cache.v) + (s.page * vs.page + s.slot * vs.token + h * vs.head) * es,
                  bytes(p.value) + (t * p.value.stride(0) + h * p.value.stride(1)) * es, row_bytes);
    }
  });
}

void CpuBackend::append_paged_mla_kv_cache(const detail::AppendPagedMLAParams& p) const {
  const MLACache& cache = p.cache;
  const std::int64_t es = std::int64_t(cache.ckv.element_size());
  const auto* batch = p.batch_indices.data_as<const std::int32_t>();
  const auto* pos = p.positions.data_as<const std::int32_t>();
  // One row of append data -> one token slot of a [pages, page_size, dim] cache view.
  const auto write = [es](const TensorView& dst, const TensorView& src, std::int64_t t, Slot s) {
    std::memcpy(bytes(dst) + (s.page * dst.stride(0) + s.slot * dst.stride(1)) * es,
                bytes(src) + t * src.stride(0) * es, std::size_t(src.size(1) * es));
  };
  for_each_token(p.ckv.size(0), [&](std::int64_t t) {
    const Slot s = slot_of(p.table, batch[t], pos[t], cache.page_size());
    write(cache.ckv, p.ckv, t, s);
    if (p.kpe.defined()) write(cache.kpe, p.kpe, t, s);
  });
}

void CpuBackend::get_batch_indices_positions(const detail::BatchIndicesPositionsParams& p) const {
  const auto* indptr = p.append_indptr.data_as<const std::int32_t>();
  const auto* seq_lens = p.seq_lens.data_as<const std::int32_t>();
  auto* batch = p.batch_indices.data_as<std::int32_t>();
  auto* pos = p.positions.data_as<std::int32_t>();
  const std::int64_t batch_size = p.append_indptr.size(0) - 1;
  for (std::int64_t b = 0; b < batch_size; ++b) {
    // The appended tokens are the tail of the already extended sequence.
    const std::int32_t first = seq_lens[b] - (indptr[b + 1] - indptr[b]);
    for (std::int32_t t = indptr[b]; t < indptr[b + 1]; ++t) {
      batch[t] = std::int32_t(b);
      pos[t] = first + (t - indptr[b]);
    }
  }
}

void CpuBackend::get_seq_lens(const detail::SeqLensParams& p) const {
  const auto* indptr = p.kv_indptr.data_as<const std::int32_t>();
  const auto* last = p.kv_last_page_len.data_as<const std::int32_t>();
  auto* out = p.seq_lens.data_as<std::int32_t>();
  for (std::int64_t i = 0; i + 1 < p.kv_indptr.size(0); ++i) {
    const std::int64_t pages = indptr[i + 1] - indptr[i];
    out[i] = pages == 0 ? 0 : std::int32_t((pages - 1) * p.page_size + last[i]);
  }
}

}  // namespace kvinfer::cpu
