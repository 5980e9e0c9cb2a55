// SPDX-License-Identifier: Apache-2.0
// The page pool of `kvinfer serve`: hands out page ids of the KV cache, with a
// reference count per page so that requests can share the pages of a common
// prefix; a page returns to the pool when its last holder releases it.
#pragma once

#include <cstdint>
#include <vector>

namespace kvinfer::cli {

class PageAllocator {
 public:
  // Pages come out in a shuffled order (seeded), as a long-running server's free
  // list leaves them: a request's pages are not contiguous in memory.
  PageAllocator(std::int32_t num_pages, std::uint64_t seed);

  std::int32_t num_pages() const { return std::int32_t(refcount_.size()); }
  std::int32_t free_pages() const { return std::int32_t(free_.size()); }
  std::int32_t in_use() const { return num_pages() - free_pages(); }
  std::int32_t peak_in_use() const { return peak_; }

  // A fresh page with reference count 1; throws std::logic_error when none is free
  // (the scheduler reserves pages before admitting a request, so that is a bug).
  std::int32_t allocate();
  void retain(std::int32_t page);
  void release(std::int32_t page);
  void release(const std::vector<std::int32_t>& pages);

 private:
  std::vector<std::int32_t> free_;      // stack of free page ids
  std::vector<std::int32_t> refcount_;  // [num_pages]
  std::int32_t peak_ = 0;
};

}  // namespace kvinfer::cli
