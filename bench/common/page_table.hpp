// SPDX-License-Identifier: Apache-2.0
// The page tables of the benchmarks, built once here: each request's pages are the
// next slice of one pool, the pool in a serving system's shuffled order (the same
// order the tests' testing::random_page_table draws from the same seed) or in order.
// Built on the host, where plan() reads indptr and last_page_len; run() reads the
// indices on the device they are copied to.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer::bench {

// Pages a request of `kv_len` tokens takes.
inline std::int32_t pages_for(std::int64_t kv_len, std::int64_t page_size) {
  return std::int32_t((kv_len + page_size - 1) / page_size);
}

// Page ids 0..num_pages-1, shuffled by mt19937_64(seed) when a seed is given.
std::vector<std::int32_t> page_pool(std::int64_t num_pages, std::optional<std::uint64_t> shuffle_seed);

// A CSR page table on the host.
struct HostPageTable {
  std::vector<std::int32_t> indptr{0}, indices, last_page_len;

  // Appends a request of kv_len tokens held in `pages` (pages_for(kv_len) of them).
  void add(std::span<const std::int32_t> pages, std::int64_t kv_len, std::int64_t page_size);
  std::int64_t batch_size() const { return std::int64_t(last_page_len.size()); }
  std::int64_t num_pages() const { return std::int64_t(indices.size()); }
};

// Request i of kv_lens takes the next pages_for(kv_lens[i]) pages of `pool`.
HostPageTable slice_pool(std::span<const std::int32_t> kv_lens, std::int64_t page_size,
                         std::span<const std::int32_t> pool);
// The same over a pool of exactly the pages needed, shuffled by `shuffle_seed` or in order.
HostPageTable make_page_table(std::span<const std::int32_t> kv_lens, std::int64_t page_size,
                              std::optional<std::uint64_t> shuffle_seed);

// An int32 host tensor holding `values`.
Tensor host_i32(std::span<const std::int32_t> values);
inline Tensor host_i32(std::initializer_list<std::int32_t> values) {
  return host_i32(std::span<const std::int32_t>(values.begin(), values.size()));
}

// A table's arrays as tensors: indptr and last_page_len on the host (what plan()
// reads), indices on `indices_device` (what run() reads).
struct PageTableTensors {
  Tensor indptr, indices, last_page_len;
  PageTable view() const { return {indptr, indices, last_page_len}; }
};
PageTableTensors to_tensors(const HostPageTable& table, Device indices_device);

}  // namespace kvinfer::bench
