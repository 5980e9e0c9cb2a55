// SPDX-License-Identifier: Apache-2.0
#include "core/check.hpp"

#include <fmt/ranges.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace kvinfer::detail {

namespace {

// Byte offsets from t.data() of the first and one past the last byte the view
// addresses; false when they overflow int64 (then no buffer can hold the view).
bool byte_span(const TensorView& t, std::int64_t& lo, std::int64_t& hi) {
  const auto es = std::int64_t(t.element_size());
  lo = 0;
  hi = es;
  for (int d = 0; d < t.rank(); ++d) {
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(t.size(d) - 1, t.stride(d), &reach) ||
        __builtin_mul_overflow(reach, es, &reach)) {
      return false;
    }
    if (__builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi)) return false;
  }
  return true;
}

// The memory behind a tensor argument, before any kernel reads it: a view with
// elements needs a data pointer, aligned to its element size (kernels load whole
// elements), and -- when its extent is known -- shape and strides inside that extent.
void check_memory(std::string_view op, std::string_view arg, const TensorView& t) {
  for (const std::int64_t n : t.shape()) {
    if (n == 0) return;  // no elements: the data pointer is never read
  }
  if (t.data() == nullptr) {
    fail(op, fmt::format("{}.data", arg), "null",
         fmt::format("a tensor with elements needs memory ({}, {} elements)", t.describe(), t.numel()));
  }
  const auto address = reinterpret_cast<std::uintptr_t>(t.data());
  if (address % t.element_size() != 0) {
    fail(op, fmt::format("{}.data", arg), fmt::format("{:#x}", address),
         fmt::format("must be aligned to the element size of {} ({} bytes)", dtype_name(t.dtype()),
                     t.element_size()));
  }
  if (!t.has_extent()) return;
  std::int64_t lo = 0, hi = 0;
  const std::int64_t start = static_cast<const char*>(t.data()) - static_cast<const char*>(t.extent_begin());
  const auto value = [&] {
    return fmt::format("{} with strides [{}]", t.describe(), fmt::join(t.strides(), ", "));
  };
  if (!byte_span(t, lo, hi) || __builtin_add_overflow(lo, start, &lo) ||
      __builtin_add_overflow(hi, start, &hi)) {
    fail(op, arg, value(), "its shape and strides address more than 2^63 bytes");
  }
  if (lo < 0 || hi > t.extent_bytes()) {
    fail(op, arg, value(),
         fmt::format("addresses bytes [{}, {}) of its buffer of {} bytes: the buffer is too small for the "
                     "shape and strides",
                     lo, hi, t.extent_bytes()));
  }
}

}  // namespace

void check_defined(std::string_view op, std::string_view arg, const TensorView& t) {
  require(t.defined(), op, arg, "(absent)", "a tensor is required");
  check_memory(op, arg, t);
}

void check_dtype(std::string_view op, std::string_view arg, const TensorView& t, DType want) {
  check_defined(op, arg, t);
  if (t.dtype() != want) {
    fail(op, fmt::format("{}.dtype", arg), dtype_name(t.dtype()),
         fmt::format("must be {}", dtype_name(want)));
  }
}

void check_rank(std::string_view op, std::string_view arg, const TensorView& t, int rank) {
  check_defined(op, arg, t);
  if (t.rank() != rank) {
    fail(op, fmt::format("{}.shape", arg), t.shape_string(), fmt::format("must have rank {}", rank));
  }
}

void check_device(std::string_view op, std::string_view arg, const TensorView& t, Device want) {
  check_defined(op, arg, t);
  if (t.device() != want) {
    fail(op, fmt::format("{}.device", arg), to_string(t.device()),
         fmt::format("must be on {} (the device the operation runs on)", to_string(want)));
  }
}

void check_last_dim_contiguous(std::string_view op, std::string_view arg, const TensorView& t) {
  check_defined(op, arg, t);
  if (!t.last_dim_contiguous()) {
    fail(op, fmt::format("{}.stride(-1)", arg), std::to_string(t.stride(-1)),
         "the last dimension must be contiguous (stride 1)");
  }
}

void check_size(std::string_view op, std::string_view arg, const TensorView& t, int dim,
                std::int64_t want, std::string_view why) {
  if (t.size(dim) != want) {
    fail(op, fmt::format("{}.shape[{}]", arg, dim), std::to_string(t.size(dim)),
         fmt::format("must be {} ({})", want, why));
  }
}

void check_index_array(std::string_view op, std::string_view arg, const TensorView& t,
                       std::int64_t length) {
  check_defined(op, arg, t);
  if (t.dtype() != DType::kI32) {
    fail(op, fmt::format("{}.dtype", arg), dtype_name(t.dtype()),
         "index arrays must be int32 (convert int64 arrays to int32; they are never reinterpreted)");
  }
  check_rank(op, arg, t, 1);
  require(t.size(0) <= 1 || t.stride(0) == 1, op, fmt::format("{}.stride(0)", arg),
          std::to_string(t.stride(0)), "index arrays must be contiguous");
  if (length >= 0 && t.size(0) != length) {
    fail(op, fmt::format("{}.shape[0]", arg), std::to_string(t.size(0)),
         fmt::format("must be {}", length));
  }
}

void check_indptr_contents(std::string_view op, std::string_view arg, const std::int32_t* indptr,
                           std::int64_t length) {
  if (length == 0) fail(op, fmt::format("{}.shape[0]", arg), "0", "an indptr has batch_size + 1 >= 1 entries");
  if (indptr[0] != 0) fail(op, fmt::format("{}[0]", arg), std::to_string(indptr[0]), "an indptr must start at 0");
  for (std::int64_t i = 1; i < length; ++i) {
    if (indptr[i] < indptr[i - 1]) {
      fail(op, fmt::format("{}[{}]", arg, i), std::to_string(indptr[i]),
           fmt::format("an indptr must be non-decreasing ({}[{}] = {})", arg, i - 1, indptr[i - 1]));
    }
  }
}

void check_backend_built(std::string_view op, std::string_view arg, Device device) {
  if (device.is_cuda() && !cuda_backend_built()) {
    fail(op, fmt::format("{}.device", arg), to_string(device),
         "the CUDA backend is not built (configure with -DKVINFER_CUDA=ON on a machine with nvcc)");
  }
}

bool check_indices_enabled() {
  // Read once: the checked mode is a property of the process, not of a call.
  static const bool enabled = [] {
    const char* v = std::getenv("KVINFER_CHECK_INDICES");
    return v != nullptr && std::string_view(v) != "" && std::string_view(v) != "0";
  }();
  return enabled;
}

}  // namespace kvinfer::detail
