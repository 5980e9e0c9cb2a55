// SPDX-License-Identifier: Apache-2.0
#include "kvinfer/core/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/backend.hpp"
#include "core/check.hpp"

namespace kvinfer {
namespace {

constexpr std::string_view kOp = "TensorView";

void check_shape(std::span<const std::int64_t> shape, DType dtype) {
  detail::require_v(dtype_size(dtype) != 0, kOp, "dtype", int(dtype), "must be one of the DType values");
  detail::require_v(shape.size() <= std::size_t(kMaxRank), kOp, "rank", shape.size(),
                    "at most 6 dimensions are supported");
  std::int64_t elems = 1;
  bool overflow = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    // Runs for every view made: the message is only formatted on failure.
    if (shape[d] < 0)
      detail::fail(kOp, fmt::format("shape[{}]", d), std::to_string(shape[d]), "sizes must be non-negative");
    overflow |= __builtin_mul_overflow(elems, shape[d], &elems);
  }
  // (Contiguous strides and numel() are products of the sizes.)
  if (overflow && elems != 0) {
    detail::fail(kOp, "shape", fmt::format("[{}]", fmt::join(shape, ", ")),
                 "the number of elements must fit in int64");
  }
}

}  // namespace

TensorView::TensorView(void* data, DType dtype, std::span<const std::int64_t> shape, Device device)
    : data_(data), dtype_(dtype), device_(device), rank_(int(shape.size())) {
  check_shape(shape, dtype);
  std::uint64_t stride = 1;  // wraps only past a size-0 dim (check_shape), where strides do not matter
  for (int d = rank_ - 1; d >= 0; --d) {
    shape_[d] = shape[d];
    strides_[d] = std::int64_t(stride);
    stride *= std::uint64_t(shape[d]);
  }
}

TensorView::TensorView(void* data, DType dtype, std::span<const std::int64_t> shape,
                       std::span<const std::int64_t> strides, Device device)
    : data_(data), dtype_(dtype), device_(device), rank_(int(shape.size())) {
  check_shape(shape, dtype);
  // Views are made on every run(): messages are formatted only on failure.
  if (strides.size() != shape.size()) {
    detail::fail(kOp, "strides", fmt::format("{}", strides),
                 fmt::format("must have one entry per dimension ({})", shape.size()));
  }
  for (int d = 0; d < rank_; ++d) {
    shape_[d] = shape[d];
    strides_[d] = strides[d];
  }
}

TensorView::TensorView(void* data, std::size_t nbytes, DType dtype, std::span<const std::int64_t> shape,
                       Device device)
    : TensorView(data, dtype, shape, device) {
  extent_begin_ = data;
  extent_bytes_ = std::int64_t(nbytes);
}

TensorView::TensorView(void* data, std::size_t nbytes, DType dtype, std::span<const std::int64_t> shape,
                       std::span<const std::int64_t> strides, Device device)
    : TensorView(data, dtype, shape, strides, device) {
  extent_begin_ = data;
  extent_bytes_ = std::int64_t(nbytes);
}

int TensorView::wrap(int dim) const {
  const int d = dim < 0 ? dim + rank_ : dim;
  // Called for every size()/stride(): the message is only formatted on failure.
  if (d < 0 || d >= rank_) {
    detail::fail(kOp, "dim", std::to_string(dim),
                 fmt::format("must index one of the {} dimensions", rank_ < 0 ? 0 : rank_));
  }
  return d;
}

std::int64_t TensorView::numel() const {
  if (rank_ < 0) return 0;
  std::uint64_t n = 1;  // fits in int64 (check_shape), unless a size is 0: then it is 0
  for (int d = 0; d < rank_; ++d) n *= std::uint64_t(shape_[d]);
  return std::int64_t(n);
}

bool TensorView::is_contiguous() const {
  std::int64_t stride = 1;
  for (int d = rank_ - 1; d >= 0; --d) {
    if (shape_[d] != 1 && strides_[d] != stride) return false;
    stride *= shape_[d];
  }
  return true;
}

TensorView TensorView::slice(int dim, std::int64_t start, std::int64_t stop) const {
  const int d = wrap(dim);
  if (!(0 <= start && start <= stop && stop <= shape_[d])) {
    detail::fail(kOp, "slice", fmt::format("[{}, {}) of dim {} (size {})", start, stop, d, shape_[d]),
                 "must satisfy 0 <= start <= stop <= size");
  }
  TensorView v = *this;
  v.data_ = static_cast<char*>(data_) + start * strides_[d] * std::int64_t(element_size());
  v.shape_[d] = stop - start;
  return v;
}

TensorView TensorView::select(int dim, std::int64_t index) const {
  const int d = wrap(dim);
  detail::require_v(0 <= index && index < shape_[d], kOp, "index", index,
                    detail::later("must be in [0, {}) for dim {}", shape_[d], d));
  TensorView v = *this;
  v.data_ = static_cast<char*>(data_) + index * strides_[d] * std::int64_t(element_size());
  for (int i = d; i + 1 < rank_; ++i) {
    v.shape_[i] = shape_[i + 1];
    v.strides_[i] = strides_[i + 1];
  }
  v.rank_ = rank_ - 1;
  return v;
}

TensorView TensorView::unsqueeze(int dim) const {
  detail::require_v(rank_ < kMaxRank, kOp, "rank", rank_, "at most 6 dimensions are supported");
  const int d = dim < 0 ? dim + rank_ + 1 : dim;
  detail::require_v(d >= 0 && d <= rank_, kOp, "dim", dim, "must be in [-rank-1, rank]");
  TensorView v = *this;
  for (int i = rank_; i > d; --i) {
    v.shape_[i] = shape_[i - 1];
    v.strides_[i] = strides_[i - 1];
  }
  v.shape_[d] = 1;
  v.strides_[d] = d < rank_ ? shape_[d] * strides_[d] : 1;
  v.rank_ = rank_ + 1;
  return v;
}

TensorView TensorView::with_dtype(DType dtype) const {
  detail::require(dtype_size(dtype) == dtype_size(dtype_), kOp, "dtype", dtype_name(dtype),
                  detail::later("a reinterpreting view keeps the element size of {}", dtype_name(dtype_)));
  TensorView v = *this;
  v.dtype_ = dtype;
  return v;
}

void* TensorView::element_ptr(std::span<const std::int64_t> index) const {
  std::int64_t offset = 0;
  for (int d = 0; d < rank_; ++d) offset += index[d] * strides_[d];
  return static_cast<char*>(data_) + offset * std::int64_t(element_size());
}

std::string TensorView::shape_string() const {
  return fmt::format("[{}]", fmt::join(shape(), ", "));
}

std::string TensorView::describe() const {
  if (!defined()) return "(absent)";
  return fmt::format("{}{} on {}", dtype_name(dtype_), shape_string(), to_string(device_));
}

Tensor Tensor::empty(std::span<const std::int64_t> shape, DType dtype, Device device) {
  Tensor t;
  t.view_ = TensorView(nullptr, dtype, shape, device);
  // The size in bytes, checked: a product of sizes must not wrap into a small buffer.
  std::int64_t elems = 1;
  for (const std::int64_t n : shape) {
    if (__builtin_mul_overflow(elems, n, &elems) || elems > (std::int64_t(1) << 56)) {
      detail::fail("Tensor::empty", "shape", t.view_.shape_string(), "holds more than 2^56 elements");
    }
  }
  // At least one byte so that every tensor, even an empty one, has a distinct address.
  const std::size_t bytes = std::max<std::size_t>(1, std::size_t(elems) * dtype_size(dtype));
  const detail::Backend& backend = detail::backend_for(device);
  const int index = device.index;
  void* ptr = backend.allocate(bytes, index);
  t.storage_ = std::shared_ptr<void>(ptr, [&backend, index](void* p) { backend.deallocate(p, index); });
  t.view_ = TensorView(ptr, bytes, dtype, shape, device);
  return t;
}

Tensor Tensor::zeros(std::span<const std::int64_t> shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  fill_bytes(t, 0);
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  return zeros(std::span<const std::int64_t>(shape.begin(), shape.size()), dtype, device);
}

Tensor Tensor::to(Device device) const {
  Tensor t = empty(view_.shape(), view_.dtype(), device);
  copy(t, view_);
  // copy() is asynchronous between a GPU and the host; the result is read at once.
  if (!device.is_cpu()) detail::backend_for(device).synchronize(nullptr);
  if (!view_.device().is_cpu()) detail::backend_for(view_.device()).synchronize(nullptr);
  return t;
}

namespace {

// Strided elementwise copy on the host, recursing over dims.
void copy_host(const TensorView& dst, const TensorView& src, int dim, char* d, const char* s) {
  const std::size_t es = dst.element_size();
  if (dim == dst.rank()) {
    std::memcpy(d, s, es);
    return;
  }
  const std::int64_t n = dst.size(dim);
  if (dim == dst.rank() - 1 && dst.stride(dim) == 1 && src.stride(dim) == 1) {
    std::memcpy(d, s, std::size_t(n) * es);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    copy_host(dst, src, dim + 1, d + i * dst.stride(dim) * std::int64_t(es),
              s + i * src.stride(dim) * std::int64_t(es));
  }
}

}  // namespace

void copy(const TensorView& dst, const TensorView& src, Stream stream) {
  constexpr std::string_view op = "copy";
  detail::check_defined(op, "dst", dst);
  detail::check_defined(op, "src", src);
  detail::require(dst.dtype() == src.dtype(), op, "src.dtype", dtype_name(src.dtype()),
                  fmt::format("must equal dst.dtype ({})", dtype_name(dst.dtype())));
  detail::require(std::ranges::equal(dst.shape(), src.shape()), op, "src.shape", src.shape_string(),
                  fmt::format("must equal dst.shape {}", dst.shape_string()));
  if (dst.numel() == 0) return;
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    if (dst.rank() == 0) {
      std::memcpy(dst.data(), src.data(), dst.element_size());
      return;
    }
    copy_host(dst, src, 0, static_cast<char*>(dst.data()), static_cast<const char*>(src.data()));
    return;
  }
  detail::check_backend_built(op, "dst", dst.device());
  detail::check_backend_built(op, "src", src.device());
  detail::require(dst.is_contiguous(), op, "dst", dst.describe(),
                  "copies to or from a GPU need contiguous tensors");
  detail::require(src.is_contiguous(), op, "src", src.describe(),
                  "copies to or from a GPU need contiguous tensors");
  // The GPU's runtime copies between any two of host and device memory.
  const Device gpu = dst.device().is_cpu() ? src.device() : dst.device();
  detail::backend_for(gpu).copy_async(dst.data(), src.data(), std::size_t(dst.numel()) * dst.element_size(),
                                      stream);
}

void fill_bytes(const TensorView& dst, std::uint8_t byte, Stream stream) {
  detail::check_defined("fill_bytes", "dst", dst);
  if (dst.numel() == 0) return;
  if (dst.device().is_cpu()) {
    if (dst.is_contiguous()) {
      std::memset(dst.data(), byte, std::size_t(dst.numel()) * dst.element_size());
      return;
    }
    std::vector<std::uint8_t> one(dst.element_size(), byte);
    // Broadcast by copying a zero-stride view of one element.
    std::array<std::int64_t, kMaxRank> zero{};
    copy(dst, TensorView(one.data(), dst.dtype(), dst.shape(), std::span(zero.data(), dst.shape().size())));
    return;
  }
  detail::check_backend_built("fill_bytes", "dst", dst.device());
  detail::require(dst.is_contiguous(), "fill_bytes", "dst", dst.describe(),
                  "GPU fills need a contiguous tensor");
  detail::backend_for(dst.device())
      .fill_async(dst.data(), byte, std::size_t(dst.numel()) * dst.element_size(), stream);
}

}  // namespace kvinfer
