// SPDX-License-Identifier: Apache-2.0
// Ragged tensors: checks of the data/indptr pair and per-request lengths.
#include <fmt/format.h>

#include "core/check.hpp"
#include "kvinfer/layout/ragged.hpp"

namespace kvinfer {

// Arguments are named "<name>" (the data) and "<name>.indptr".
void validate_ragged(std::string_view op, std::string_view name, const RaggedTensor& t) {
  detail::check_rank(op, name, t.data, 3);
  detail::check_last_dim_contiguous(op, name, t.data);
  const std::string indptr_arg = fmt::format("{}.indptr", name);
  detail::check_index_array(op, indptr_arg, t.indptr);
  detail::require_v(t.indptr.size(0) >= 1, op, fmt::format("{}.shape[0]", indptr_arg), t.indptr.size(0),
                    "an indptr has batch_size + 1 >= 1 entries");
  // A device-resident indptr cannot be read without a synchronisation; plan checks
  // its host copy.
  if (!t.indptr.device().is_cpu()) return;
  const auto* indptr = t.indptr.data_as<const std::int32_t>();
  const std::int64_t length = t.indptr.size(0);
  detail::check_indptr_contents(op, indptr_arg, indptr, length);
  if (indptr[length - 1] != t.nnz()) {
    detail::fail(op, fmt::format("{}[{}]", indptr_arg, length - 1), std::to_string(indptr[length - 1]),
                 fmt::format("must equal nnz = {} (the rows of {} {}, {} layout)", t.nnz(), name,
                             t.data.shape_string(), kv_layout_name(t.layout)));
  }
}

std::vector<std::int32_t> lengths_from_indptr(std::string_view op, std::string_view name,
                                              const TensorView& indptr_host) {
  detail::check_index_array(op, name, indptr_host);
  detail::require(indptr_host.device().is_cpu(), op, fmt::format("{}.device", name),
                  to_string(indptr_host.device()), "its contents are read here, so it must be on the host");
  const auto* indptr = indptr_host.data_as<const std::int32_t>();
  detail::check_indptr_contents(op, name, indptr, indptr_host.size(0));
  std::vector<std::int32_t> lengths(std::size_t(indptr_host.size(0) - 1));
  for (std::size_t i = 0; i < lengths.size(); ++i) lengths[i] = indptr[i + 1] - indptr[i];
  return lengths;
}

}  // namespace kvinfer
