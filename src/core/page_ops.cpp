// SPDX-License-Identifier: Apache-2.0
// Public entry points of the page operations (append to a paged KV or MLA cache,
// the index helpers that prepare an append): validate, then run on the device of
// the data.
#include <fmt/format.h>

#include "backend/backend.hpp"
#include "core/check.hpp"
#include "core/copy_to.hpp"
#include "core/op_params.hpp"
#include "core/page_table.hpp"
#include "kvinfer/ops/page.hpp"

namespace kvinfer {
namespace {

// An index array's contents on the host: the array itself, or a copy of a device one
// (the checked mode, KVINFER_CHECK_INDICES=1).
struct HostInts {
  Tensor storage;
  TensorView view;
  const std::int32_t* data() const { return view.data_as<const std::int32_t>(); }
};

HostInts on_host(const TensorView& t) {
  if (t.device().is_cpu()) return {Tensor(), t};
  Tensor copy = detail::copy_to(t, Device::cpu());
  TensorView view = copy.view();
  return {std::move(copy), view};
}

// Contents are read on the host always, and from a GPU only in the checked mode,
// since reading them there needs a synchronisation.
bool check_contents(Device device) {
  return device.is_cpu() || detail::check_indices_enabled();
}

// Append data: rank `rank`, the cache's dtype and device, contiguous last dim.
void check_append_data(std::string_view op, std::string_view arg, const TensorView& t, int rank, DType dtype,
                       Device device) {
  detail::check_rank(op, arg, t, rank);
  detail::require(t.dtype() == dtype, op, fmt::format("{}.dtype", arg), dtype_name(t.dtype()),
                  fmt::format("must equal the cache's dtype ({}); append copies elements unconverted",
                              dtype_name(dtype)));
  detail::check_device(op, arg, t, device);
  detail::check_last_dim_contiguous(op, arg, t);
}

// batch_indices / positions: int32 [nnz] on `device`.
void check_token_indices(std::string_view op, const TensorView& batch_indices, const TensorView& positions,
                         std::int64_t nnz, std::string_view nnz_source, Device device) {
  for (auto [arg, t] : {std::pair{std::string_view("batch_indices"), &batch_indices},
                        std::pair{std::string_view("positions"), &positions}}) {
    detail::check_index_array(op, arg, *t);
    detail::check_size(op, arg, *t, 0, nnz, fmt::format("nnz, the rows of {}", nnz_source));
    detail::check_device(op, arg, *t, device);
  }
}

// Every appended token must name a request of the page table and a position that
// the table already covers: the page it lands on is then one of the request's.
void check_append_contents(std::string_view op, const TensorView& batch_indices, const TensorView& positions,
                           const PageTable& table, std::int64_t page_size, std::int64_t num_pages) {
  const HostInts indptr = on_host(table.indptr), indices = on_host(table.indices),
                 last_page_len = on_host(table.last_page_len);
  const PageTable host{indptr.view, indices.view, last_page_len.view};
  const std::vector<std::int32_t> kv_lens = kv_lens_from_page_table(op, host, page_size, num_pages);
  const HostInts batch = on_host(batch_indices), pos = on_host(positions);
  const std::int64_t batch_size = table.batch_size();
  for (std::int64_t t = 0; t < batch_indices.size(0); ++t) {
    const std::int32_t b = batch.data()[t];
    if (b < 0 || b >= batch_size) {
      detail::fail(op, fmt::format("batch_indices[{}]", t), std::to_string(b),
                   fmt::format("must be in [0, batch_size = {})", batch_size));
    }
    const std::int32_t p = pos.data()[t];
    if (p < 0 || p >= kv_lens[std::size_t(b)]) {
      detail::fail(op, fmt::format("positions[{}]", t), std::to_string(p),
                   fmt::format("must be in [0, kv_len = {}) of request {} (the page table must already "
                               "cover the appended tokens)",
                               kv_lens[std::size_t(b)], b));
    }
  }
}

}  // namespace

void append_paged_kv_cache(const TensorView& append_key, const TensorView& append_value,
                           const TensorView& batch_indices, const TensorView& positions,
                           const PagedKVCache& cache, const PageTable& table, Stream stream) {
  constexpr std::string_view op = "append_paged_kv_cache";
  validate_paged_kv_cache(op, cache);
  const Device device = cache.device();
  for (auto [arg, t] : {std::pair{std::string_view("append_key"), &append_key},
                        std::pair{std::string_view("append_value"), &append_value}}) {
    check_append_data(op, arg, *t, 3, cache.dtype(), device);
    detail::check_size(op, arg, *t, 1, cache.num_heads(), "num_kv_heads of the cache");
    detail::check_size(op, arg, *t, 2, cache.head_dim(), "head_dim of the cache");
  }
  const std::int64_t nnz = append_key.size(0);
  detail::check_size(op, "append_value", append_value, 0, nnz, "nnz, the rows of append_key");
  check_token_indices(op, batch_indices, positions, nnz, "append_key", device);
  validate_page_table_arrays(op, table, device);
  detail::check_backend_built(op, "kv_cache.k", device);
  if (check_contents(device)) {
    check_append_contents(op, batch_indices, positions, table, cache.page_size(), cache.num_pages());
  }
  if (nnz == 0) return;

  const detail::AppendPagedKVParams p{append_key, append_value, batch_indices, positions,
                                      cache,      table,        stream};
  detail::backend_for(device).append_paged_kv_cache(p);
}

void append_paged_mla_kv_cache(const TensorView& append_ckv, const TensorView& append_kpe,
                               const TensorView& batch_indices, const TensorView& positions,
                               const MLACache& cache, const PageTable& table, Stream stream) {
  constexpr std::string_view op = "append_paged_mla_kv_cache";
  validate_mla_cache(op, cache);
  const Device device = cache.ckv.device();
  const DType dtype = cache.ckv.dtype();
  check_append_data(op, "append_ckv", append_ckv, 2, dtype, device);
  detail::check_size(op, "append_ckv", append_ckv, 1, cache.head_dim_ckv(), "head_dim_ckv of the cache");
  const std::int64_t nnz = append_ckv.size(0);
  TensorView kpe;  // absent iff the cache has no rotary part
  if (cache.kpe.defined()) {
    check_append_data(op, "append_kpe", append_kpe, 2, dtype, device);
    detail::check_size(op, "append_kpe", append_kpe, 0, nnz, "nnz, the rows of append_ckv");
    detail::check_size(op, "append_kpe", append_kpe, 1, cache.head_dim_kpe(), "head_dim_kpe of the cache");
    kpe = append_kpe;
  } else if (append_kpe.defined()) {
    detail::require(append_kpe.rank() == 2 && append_kpe.size(1) == 0, op, "append_kpe",
                    append_kpe.describe(), "must be absent (or [nnz, 0]): the cache has no kpe part");
  }
  check_token_indices(op, batch_indices, positions, nnz, "append_ckv", device);
  validate_page_table_arrays(op, table, device);
  detail::check_backend_built(op, "ckv_cache", device);
  if (check_contents(device)) {
    check_append_contents(op, batch_indices, positions, table, cache.page_size(), cache.num_pages());
  }
  if (nnz == 0) return;

  const detail::AppendPagedMLAParams p{append_ckv, kpe, batch_indices, positions, cache, table, stream};
  detail::backend_for(device).append_paged_mla_kv_cache(p);
}

void get_batch_indices_positions(const TensorView& append_indptr, const TensorView& seq_lens,
                                 const TensorView& batch_indices, const TensorView& positions,
                                 Stream stream) {
  constexpr std::string_view op = "get_batch_indices_positions";
  detail::check_index_array(op, "append_indptr", append_indptr);
  detail::require_v(append_indptr.size(0) >= 1, op, "append_indptr.shape[0]", append_indptr.size(0),
                    "an indptr has batch_size + 1 >= 1 entries");
  const std::int64_t batch_size = append_indptr.size(0) - 1;
  const Device device = append_indptr.device();
  detail::check_index_array(op, "seq_lens", seq_lens);
  detail::check_size(op, "seq_lens", seq_lens, 0, batch_size, "batch_size = append_indptr.shape[0] - 1");
  detail::check_device(op, "seq_lens", seq_lens, device);
  detail::check_index_array(op, "batch_indices", batch_indices);
  const std::int64_t nnz = batch_indices.size(0);
  check_token_indices(op, batch_indices, positions, nnz, "batch_indices", device);
  detail::check_backend_built(op, "append_indptr", device);
  if (check_contents(device)) {
    const HostInts indptr = on_host(append_indptr), lens = on_host(seq_lens);
    detail::check_indptr_contents(op, "append_indptr", indptr.data(), batch_size + 1);
    // The outputs are what is sized to the input (one entry per appended token), so a
    // mismatch names them; positions was checked to have batch_indices' length.
    detail::require_v(indptr.data()[batch_size] == nnz, op, "batch_indices.shape[0]", nnz,
                      fmt::format("must equal append_indptr[batch_size] = {}, the appended tokens (as must "
                                  "positions.shape[0])",
                                  indptr.data()[batch_size]));
    for (std::int64_t b = 0; b < batch_size; ++b) {
      const std::int32_t append_len = indptr.data()[b + 1] - indptr.data()[b];
      if (lens.data()[b] < append_len) {
        detail::fail(op, fmt::format("seq_lens[{}]", b), std::to_string(lens.data()[b]),
                     fmt::format("must be >= the {} appended token(s) of request {} (seq_lens count them)",
                                 append_len, b));
      }
    }
  }
  if (nnz == 0) return;

  const detail::BatchIndicesPositionsParams p{append_indptr, seq_lens, batch_indices, positions, stream};
  detail::backend_for(device).get_batch_indices_positions(p);
}

void get_seq_lens(const TensorView& kv_indptr, const TensorView& kv_last_page_len, std::int64_t page_size,
                  const TensorView& seq_lens, Stream stream) {
  constexpr std::string_view op = "get_seq_lens";
  detail::check_index_array(op, "kv_indptr", kv_indptr);
  detail::require_v(kv_indptr.size(0) >= 1, op, "kv_indptr.shape[0]", kv_indptr.size(0),
                    "an indptr has batch_size + 1 >= 1 entries");
  const std::int64_t batch_size = kv_indptr.size(0) - 1;
  const Device device = kv_indptr.device();
  for (auto [arg, t] : {std::pair{std::string_view("kv_last_page_len"), &kv_last_page_len},
                        std::pair{std::string_view("seq_lens"), &seq_lens}}) {
    detail::check_index_array(op, arg, *t);
    detail::check_size(op, arg, *t, 0, batch_size, "batch_size = kv_indptr.shape[0] - 1");
    detail::check_device(op, arg, *t, device);
  }
  detail::require_v(page_size >= 1, op, "page_size", page_size, "must be >= 1");
  detail::check_backend_built(op, "kv_indptr", device);
  if (check_contents(device)) {
    const HostInts indptr = on_host(kv_indptr), last = on_host(kv_last_page_len);
    detail::kv_lens_from_last_page_len(op, indptr.data(), last.data(), batch_size, page_size);
  }
  if (batch_size == 0) return;

  const detail::SeqLensParams p{kv_indptr, kv_last_page_len, page_size, seq_lens, stream};
  detail::backend_for(device).get_seq_lens(p);
}

}  // namespace kvinfer
