// SPDX-License-Identifier: Apache-2.0
#include "page_allocator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

namespace kvinfer::cli {

PageAllocator::PageAllocator(std::int32_t num_pages, std::uint64_t seed)
    : free_(std::size_t(num_pages)), refcount_(std::size_t(num_pages), 0) {
  std::iota(free_.begin(), free_.end(), 0);
  std::shuffle(free_.begin(), free_.end(), std::mt19937_64(seed));
}

std::int32_t PageAllocator::allocate() {
  if (free_.empty()) throw std::logic_error(fmt::format("page pool exhausted ({} pages)", num_pages()));
  const std::int32_t page = free_.back();
  free_.pop_back();
  refcount_[std::size_t(page)] = 1;
  peak_ = std::max(peak_, in_use());
  return page;
}

void PageAllocator::retain(std::int32_t page) {
  if (refcount_.at(std::size_t(page)) <= 0)
    throw std::logic_error(fmt::format("retain of free page {}", page));
  ++refcount_[std::size_t(page)];
}

void PageAllocator::release(std::int32_t page) {
  std::int32_t& rc = refcount_.at(std::size_t(page));
  if (rc <= 0) throw std::logic_error(fmt::format("release of free page {}", page));
  if (--rc == 0) free_.push_back(page);
}

void PageAllocator::release(const std::vector<std::int32_t>& pages) {
  for (std::int32_t p : pages) release(p);
}

}  // namespace kvinfer::cli
