// SPDX-License-Identifier: Apache-2.0
// Byte copies of a test's storage, to build the expected result of an operation that
// writes in place: copy the storage, write the expected bytes into the copy through
// the same views moved onto it, run the operation, compare the bytes.
#pragma once

#include <cstring>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer::testing {

// A host tensor with t's shape, dtype and bytes.
inline Tensor clone(const Tensor& t) {
  Tensor c = Tensor::empty(t.view().shape(), t.dtype());
  std::memcpy(c.data(), t.data(), t.nbytes());
  return c;
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// The view v of storage `from` as the same view of `to` (a buffer of the same size).
inline TensorView rebase(const TensorView& v, const Tensor& from, const Tensor& to) {
  const std::ptrdiff_t offset = static_cast<const char*>(v.data()) - static_cast<const char*>(from.data());
  return TensorView(static_cast<char*>(to.data()) + offset, v.dtype(), v.shape(), v.strides(), v.device());
}

}  // namespace kvinfer::testing
