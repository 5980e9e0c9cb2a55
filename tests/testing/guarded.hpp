// SPDX-License-Identifier: Apache-2.0
// Host arrays that end at an inaccessible page: a read one element past the end
// faults at once, in any build (no sanitizer needed), so a test of "nothing is
// read outside the caller's arrays" fails loudly when something is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kvinfer/core/tensor.hpp"

namespace kvinfer::testing {

class Guarded {
 public:
  // `bytes` of storage whose last byte is followed by a PROT_NONE page.
  explicit Guarded(std::size_t bytes);
  ~Guarded();
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;

  void* data() const { return data_; }

 private:
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  void* data_ = nullptr;
};

// int32 values in a Guarded buffer, as a host view [values.size()] (which may be 0:
// then any read at all faults).
struct GuardedInts {
  explicit GuardedInts(std::span<const std::int32_t> values);
  Guarded storage;
  TensorView view;
};

}  // namespace kvinfer::testing
