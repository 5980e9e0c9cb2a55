// SPDX-License-Identifier: Apache-2.0
// The paged KV cache: views of its storage forms (5-D tensor or K/V pair), and the
// checks of the storage and of the CSR page table.
#include <fmt/format.h>

#include <limits>

#include "core/check.hpp"
#include "core/page_table.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer {
namespace {

int page_dim(KVLayout layout) {
  return layout == KVLayout::kNHD ? 1 : 2;
}
int head_dim_index(KVLayout layout) {
  return layout == KVLayout::kNHD ? 2 : 1;
}

void check_same_storage(std::string_view op, std::string_view k_arg, std::string_view v_arg,
                        const TensorView& k, const TensorView& v) {
  // Called for every run()'s cache: messages are formatted only on failure.
  if (v.dtype() != k.dtype()) {
    detail::fail(op, fmt::format("{}.dtype", v_arg), dtype_name(v.dtype()),
                 fmt::format("must equal {}.dtype ({})", k_arg, dtype_name(k.dtype())));
  }
  if (v.device() != k.device()) {
    detail::fail(op, fmt::format("{}.device", v_arg), to_string(v.device()),
                 fmt::format("must equal {}.device ({})", k_arg, to_string(k.device())));
  }
  if (!std::ranges::equal(v.shape(), k.shape())) {
    detail::fail(op, fmt::format("{}.shape", v_arg), v.shape_string(),
                 fmt::format("must equal {}.shape {}", k_arg, k.shape_string()));
  }
}

// Shape, dtype and contiguity of the three page-table arrays, wherever they live.
void check_table_structure(std::string_view op, const PageTable& table) {
  detail::check_index_array(op, "kv_indptr", table.indptr);
  detail::require_v(table.indptr.size(0) >= 1, op, "kv_indptr.shape[0]", table.indptr.size(0),
                    "an indptr has batch_size + 1 >= 1 entries");
  detail::check_index_array(op, "kv_indices", table.indices);
  detail::check_index_array(op, "kv_last_page_len", table.last_page_len);
  detail::check_size(op, "kv_last_page_len", table.last_page_len, 0, table.batch_size(),
                     "batch_size = kv_indptr.shape[0] - 1");
}

}  // namespace

PagedKVCache PagedKVCache::combined(const TensorView& kv_cache, KVLayout layout) {
  constexpr std::string_view op = "PagedKVCache::combined";
  detail::check_rank(op, "kv_cache", kv_cache, 5);
  detail::check_size(op, "kv_cache", kv_cache, 1, 2, "dim 1 holds K (index 0) and V (index 1)");
  return {kv_cache.select(1, 0), kv_cache.select(1, 1), layout};
}

PagedKVCache PagedKVCache::pair(const TensorView& k, const TensorView& v, KVLayout layout) {
  constexpr std::string_view op = "PagedKVCache::pair";
  detail::check_rank(op, "k_cache", k, 4);
  detail::check_rank(op, "v_cache", v, 4);
  check_same_storage(op, "k_cache", "v_cache", k, v);
  return {k, v, layout};
}

PageStrides page_strides(const TensorView& kv, KVLayout layout) {
  detail::check_rank("page_strides", "kv", kv, 4);
  return {kv.stride(0), kv.stride(page_dim(layout)), kv.stride(head_dim_index(layout))};
}

void validate_paged_kv_cache(std::string_view op, const PagedKVCache& cache) {
  detail::require_v(cache.layout == KVLayout::kNHD || cache.layout == KVLayout::kHND, op, "kv_cache.layout",
                    int(cache.layout), "must be KVLayout::kNHD or KVLayout::kHND");
  detail::check_rank(op, "kv_cache.k", cache.k, 4);
  detail::check_rank(op, "kv_cache.v", cache.v, 4);
  detail::require(is_float(cache.k.dtype()), op, "kv_cache.k.dtype", dtype_name(cache.k.dtype()),
                  "a KV cache holds float32, float16, bfloat16, float8_e4m3 or float8_e5m2");
  check_same_storage(op, "kv_cache.k", "kv_cache.v", cache.k, cache.v);
  detail::check_last_dim_contiguous(op, "kv_cache.k", cache.k);
  detail::check_last_dim_contiguous(op, "kv_cache.v", cache.v);
  const auto where = [&](int dim) {
    return fmt::format("dim {} of kv_cache.k {} in {} layout", dim, cache.k.shape_string(),
                       kv_layout_name(cache.layout));
  };
  if (cache.page_size() < 1) {
    detail::fail(op, "page_size", std::to_string(cache.page_size()),
                 fmt::format("must be >= 1 ({})", where(page_dim(cache.layout))));
  }
  if (cache.num_heads() < 1) {
    detail::fail(op, "num_kv_heads", std::to_string(cache.num_heads()),
                 fmt::format("must be >= 1 ({})", where(head_dim_index(cache.layout))));
  }
  if (cache.head_dim() < 1) {
    detail::fail(op, "head_dim", std::to_string(cache.head_dim()), fmt::format("must be >= 1 ({})", where(3)));
  }
}

void validate_page_table_arrays(std::string_view op, const PageTable& table, Device device) {
  check_table_structure(op, table);
  detail::check_device(op, "kv_indptr", table.indptr, device);
  detail::check_device(op, "kv_indices", table.indices, device);
  detail::check_device(op, "kv_last_page_len", table.last_page_len, device);
}

std::vector<std::int32_t> kv_lens_from_page_table(std::string_view op, const PageTable& table_host,
                                                  std::int64_t page_size, std::int64_t num_pages) {
  check_table_structure(op, table_host);
  const auto check_host = [&](std::string_view arg, const TensorView& t) {
    detail::require(t.device().is_cpu(), op, fmt::format("{}.device", arg), to_string(t.device()),
                    "the contents of this page table are read here, so it must be on the host");
  };
  check_host("kv_indptr", table_host.indptr);
  check_host("kv_indices", table_host.indices);
  check_host("kv_last_page_len", table_host.last_page_len);
  detail::require_v(page_size >= 1, op, "page_size", page_size, "must be >= 1");
  const std::int64_t batch_size = table_host.batch_size();
  const auto* indptr = table_host.indptr.data_as<const std::int32_t>();
  std::vector<std::int32_t> kv_lens = detail::kv_lens_from_last_page_len(
      op, indptr, table_host.last_page_len.data_as<const std::int32_t>(), batch_size, page_size);

  const std::int64_t used = indptr[batch_size];
  detail::require_v(table_host.indices.size(0) >= used, op, "kv_indices.shape[0]", table_host.indices.size(0),
                    fmt::format("must be >= kv_indptr[batch_size] = {} (one page id per page slot)", used));
  if (num_pages >= 0) {
    const auto* indices = table_host.indices.data_as<const std::int32_t>();
    for (std::int64_t j = 0; j < used; ++j) {
      if (indices[j] < 0 || indices[j] >= num_pages) {
        detail::fail(op, fmt::format("kv_indices[{}]", j), std::to_string(indices[j]),
                     fmt::format("page ids must be in [0, {}) (the pages of the cache)", num_pages));
      }
    }
  }
  return kv_lens;
}

namespace detail {

std::vector<std::int32_t> kv_lens_from_last_page_len(std::string_view op, const std::int32_t* kv_indptr,
                                                     const std::int32_t* kv_last_page_len,
                                                     std::int64_t batch_size, std::int64_t page_size) {
  check_indptr_contents(op, "kv_indptr", kv_indptr, batch_size + 1);
  // Bounded before (pages - 1) * page_size is formed below.
  require_v(page_size >= 1 && page_size <= std::numeric_limits<std::int32_t>::max(), op, "page_size", page_size,
            "must be in [1, 2^31 - 1]");
  std::vector<std::int32_t> kv_lens(std::size_t(batch_size), 0);
  for (std::int64_t i = 0; i < batch_size; ++i) {
    const std::int64_t pages = std::int64_t(kv_indptr[i + 1]) - kv_indptr[i];
    const std::int32_t last = kv_last_page_len[i];
    if (pages == 0) {
      if (last != 0) {
        fail(op, fmt::format("kv_last_page_len[{}]", i), std::to_string(last),
             "a request with no pages (kv_indptr[i + 1] == kv_indptr[i]) must have last_page_len 0");
      }
      continue;
    }
    if (last < 1 || last > page_size) {
      fail(op, fmt::format("kv_last_page_len[{}]", i), std::to_string(last),
           fmt::format("must be in [1, page_size = {}] for a request with {} page(s)", page_size, pages));
    }
    const std::int64_t kv_len = (pages - 1) * page_size + last;
    if (kv_len > std::numeric_limits<std::int32_t>::max()) {
      fail(op, fmt::format("kv_len[{}]", i), std::to_string(kv_len), "a request's length must fit in int32");
    }
    kv_lens[std::size_t(i)] = std::int32_t(kv_len);
  }
  return kv_lens;
}

}  // namespace detail
}  // namespace kvinfer
