// SPDX-License-Identifier: Apache-2.0
// A kernel's view of a batch's page table: the page ids (kv_indices; a request's
// entries start at its RequestInfo::kv_begin, which work items carry as kv_base), the
// page size as a fast divisor (key position -> page entry, slot), and the number of
// pages of the cache, the bound a page id must stay below.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/common/fast_divmod.cuh"
#include "kvinfer/core/tensor.hpp"

namespace kvinfer::cuda {

struct PageLookup {
  const std::int32_t* page_ids = nullptr;
  FastDivmod page_size;
  std::uint32_t num_pages = 0;  // ids must be below it
};

inline PageLookup page_lookup(const TensorView& kv_indices, std::int64_t page_size, std::int64_t num_pages) {
  return {kv_indices.data_as<const std::int32_t>(), FastDivmod(std::uint32_t(page_size)),
          std::uint32_t(std::min<std::int64_t>(num_pages, std::int64_t(1) << 31))};  // ids are int32
}

}  // namespace kvinfer::cuda
