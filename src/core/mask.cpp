// SPDX-License-Identifier: Apache-2.0
// Offsets of each request's block in a flattened (optionally bit-packed) custom mask.
#include "kvinfer/layout/mask.hpp"

#include <fmt/format.h>

#include "core/check.hpp"
#include "kvinfer/ops/packbits.hpp"

namespace kvinfer {

std::vector<std::int64_t> mask_indptr(std::span<const std::int32_t> qo_lens,
                                      std::span<const std::int32_t> kv_lens, bool packed) {
  constexpr std::string_view op = "mask_indptr";
  detail::require_v(kv_lens.size() == qo_lens.size(), op, "kv_lens.size()", kv_lens.size(),
                    fmt::format("must equal qo_lens.size() = {} (one entry per request)", qo_lens.size()));
  std::vector<std::int64_t> indptr(qo_lens.size() + 1, 0);
  for (std::size_t i = 0; i < qo_lens.size(); ++i) {
    if (qo_lens[i] < 0) detail::fail(op, fmt::format("qo_lens[{}]", i), std::to_string(qo_lens[i]), "must be >= 0");
    if (kv_lens[i] < 0) detail::fail(op, fmt::format("kv_lens[{}]", i), std::to_string(kv_lens[i]), "must be >= 0");
    const std::int64_t elements = std::int64_t(qo_lens[i]) * kv_lens[i];
    // Packed, each request's block starts on a byte of its own.
    indptr[i + 1] = indptr[i] + (packed ? packed_size(elements) : elements);
  }
  return indptr;
}

}  // namespace kvinfer
