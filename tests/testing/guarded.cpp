// SPDX-License-Identifier: Apache-2.0
#include "testing/guarded.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace kvinfer::testing {

Guarded::Guarded(std::size_t bytes) {
  const auto page = std::size_t(::sysconf(_SC_PAGESIZE));
  const std::size_t data_pages = (bytes + page - 1) / page;
  map_bytes_ = (data_pages + 1) * page;
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) throw std::runtime_error("mmap failed");
  char* guard = static_cast<char*>(map_) + data_pages * page;
  if (::mprotect(guard, page, PROT_NONE) != 0) throw std::runtime_error("mprotect failed");
  data_ = guard - bytes;
}

Guarded::~Guarded() {
  ::munmap(map_, map_bytes_);
}

GuardedInts::GuardedInts(std::span<const std::int32_t> values)
    : storage(values.size() * sizeof(std::int32_t)),
      view(storage.data(), DType::kI32, {std::int64_t(values.size())}) {
  if (!values.empty()) std::memcpy(storage.data(), values.data(), values.size() * sizeof(std::int32_t));
}

}  // namespace kvinfer::testing
