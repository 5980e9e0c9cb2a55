// SPDX-License-Identifier: Apache-2.0
// The MLA paged cache: ckv/kpe views of one [pages, page_size, ckv + kpe] tensor
// (no copy), or a separate pair, and their checks.
#include <fmt/format.h>

#include "core/check.hpp"
#include "kvinfer/layout/mla_cache.hpp"

namespace kvinfer {

MLACache MLACache::combined(const TensorView& cache, std::int64_t head_dim_ckv) {
  constexpr std::string_view op = "MLACache::combined";
  detail::check_rank(op, "mla_cache", cache, 3);
  const std::int64_t width = cache.size(2);
  if (head_dim_ckv < 1 || head_dim_ckv > width) {  // formatted only on failure: made on every run()
    detail::fail(op, "head_dim_ckv", std::to_string(head_dim_ckv),
                 fmt::format("must be in [1, {}] (the last dim of mla_cache {})", width, cache.shape_string()));
  }
  MLACache out;
  out.ckv = cache.slice(2, 0, head_dim_ckv);
  // Without a rotary part there is no kpe at all, rather than an empty view.
  if (head_dim_ckv < width) out.kpe = cache.slice(2, head_dim_ckv, width);
  return out;
}

MLACache MLACache::pair(const TensorView& ckv, const TensorView& kpe) {
  constexpr std::string_view op = "MLACache::pair";
  detail::check_rank(op, "ckv_cache", ckv, 3);
  if (kpe.defined()) detail::check_rank(op, "kpe_cache", kpe, 3);
  MLACache out;
  out.ckv = ckv;
  out.kpe = kpe;
  return out;
}

void validate_mla_cache(std::string_view op, const MLACache& cache) {
  const TensorView& ckv = cache.ckv;
  detail::check_rank(op, "ckv_cache", ckv, 3);
  detail::require(is_float(ckv.dtype()), op, "ckv_cache.dtype", dtype_name(ckv.dtype()),
                  "an MLA cache holds float32, float16, bfloat16, float8_e4m3 or float8_e5m2");
  detail::check_last_dim_contiguous(op, "ckv_cache", ckv);
  // Messages are formatted only on failure: run() checks its cache with this, and
  // allocates nothing.
  if (ckv.size(1) < 1) {
    detail::fail(op, "page_size", std::to_string(ckv.size(1)),
                 fmt::format("must be >= 1 (dim 1 of ckv_cache {})", ckv.shape_string()));
  }
  if (ckv.size(2) < 1) {
    detail::fail(op, "head_dim_ckv", std::to_string(ckv.size(2)),
                 fmt::format("must be >= 1 (dim 2 of ckv_cache {})", ckv.shape_string()));
  }
  if (!cache.kpe.defined()) return;
  const TensorView& kpe = cache.kpe;
  detail::check_rank(op, "kpe_cache", kpe, 3);
  detail::require(kpe.dtype() == ckv.dtype(), op, "kpe_cache.dtype", dtype_name(kpe.dtype()),
                  detail::later("must equal ckv_cache.dtype ({})", dtype_name(ckv.dtype())));
  if (kpe.device() != ckv.device()) {
    detail::fail(op, "kpe_cache.device", to_string(kpe.device()),
                 fmt::format("must equal ckv_cache.device ({})", to_string(ckv.device())));
  }
  detail::check_size(op, "kpe_cache", kpe, 0, ckv.size(0), "max_pages of ckv_cache");
  detail::check_size(op, "kpe_cache", kpe, 1, ckv.size(1), "page_size of ckv_cache");
  detail::check_last_dim_contiguous(op, "kpe_cache", kpe);
  detail::require_v(kpe.size(2) >= 1, op, "head_dim_kpe", kpe.size(2),
                    "must be >= 1 (leave kpe_cache absent when there is no rotary part)");
}

}  // namespace kvinfer
