// SPDX-License-Identifier: Apache-2.0
#include "bench/common/page_table.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace kvinfer::bench {

std::vector<std::int32_t> page_pool(std::int64_t num_pages, std::optional<std::uint64_t> shuffle_seed) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(num_pages));
  std::iota(ids.begin(), ids.end(), 0);
  if (shuffle_seed) std::shuffle(ids.begin(), ids.end(), std::mt19937_64(*shuffle_seed));
  return ids;
}

void HostPageTable::add(std::span<const std::int32_t> pages, std::int64_t kv_len, std::int64_t page_size) {
  indices.insert(indices.end(), pages.begin(), pages.end());
  indptr.push_back(std::int32_t(indices.size()));
  const auto n = std::int64_t(pages.size());
  last_page_len.push_back(n == 0 ? 0 : std::int32_t(kv_len - (n - 1) * page_size));
}

HostPageTable slice_pool(std::span<const std::int32_t> kv_lens, std::int64_t page_size,
                         std::span<const std::int32_t> pool) {
  HostPageTable t;
  std::size_t next = 0;
  for (const std::int32_t len : kv_lens) {
    const auto n = std::size_t(pages_for(len, page_size));
    if (next + n > pool.size()) {
      throw std::invalid_argument("slice_pool: the pool of " + std::to_string(pool.size()) +
                                  " pages is too small for the requests");
    }
    t.add(pool.subspan(next, n), len, page_size);
    next += n;
  }
  return t;
}

HostPageTable make_page_table(std::span<const std::int32_t> kv_lens, std::int64_t page_size,
                              std::optional<std::uint64_t> shuffle_seed) {
  std::int64_t pages = 0;
  for (const std::int32_t len : kv_lens) pages += pages_for(len, page_size);
  const std::vector<std::int32_t> pool = page_pool(pages, shuffle_seed);
  return slice_pool(kv_lens, page_size, pool);
}

Tensor host_i32(std::span<const std::int32_t> values) {
  Tensor t = Tensor::empty({std::int64_t(values.size())}, DType::kI32);
  std::copy(values.begin(), values.end(), t.data_as<std::int32_t>());
  return t;
}

PageTableTensors to_tensors(const HostPageTable& table, Device indices_device) {
  Tensor indices = host_i32(table.indices);
  if (!indices_device.is_cpu()) indices = indices.to(indices_device);
  return {host_i32(table.indptr), std::move(indices), host_i32(table.last_page_len)};
}

}  // namespace kvinfer::bench
