// SPDX-License-Identifier: Apache-2.0
// TensorView: a non-owning, strided view of memory on one device (strides in
// elements). Tensor: an owning buffer for programs and tests.
//
// What every operation checks of a tensor argument before touching its memory
// (kvinfer::Error naming the argument): a view with elements has a non-null data
// pointer, aligned to its element size, and lives on the device the operation runs on.
// A view that knows its extent -- an owning Tensor's, one made with its size in bytes,
// and every view derived from them (slice, select, unsqueeze, with_dtype) -- is also
// checked to address only bytes inside that extent, whatever its shape and strides.
// A view made from a raw pointer alone cannot be checked for that: kvinfer cannot know
// how much memory lies behind the pointer, nor whether it really is on the device the
// view names (a host pointer labelled cuda:0, or the reverse, is not detected), nor
// that the memory is still alive. Give the size in bytes when it is known.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "kvinfer/core/device.hpp"
#include "kvinfer/core/dtype.hpp"

namespace kvinfer {

inline constexpr int kMaxRank = 6;
using Shape = std::initializer_list<std::int64_t>;

class TensorView {
 public:
  // An absent tensor (optional arguments): defined() is false.
  TensorView() = default;
  // Contiguous (row-major) view.
  TensorView(void* data, DType dtype, std::span<const std::int64_t> shape,
             Device device = Device::cpu());
  TensorView(void* data, DType dtype, Shape shape, Device device = Device::cpu())
      : TensorView(data, dtype, std::span<const std::int64_t>(shape.begin(), shape.size()),
                   device) {}
  // Strided view; strides are in elements.
  TensorView(void* data, DType dtype, std::span<const std::int64_t> shape,
             std::span<const std::int64_t> strides, Device device = Device::cpu());
  // Views of a buffer of `nbytes` bytes starting at `data`: operations check that the
  // shape and strides stay inside it (see the top of this file).
  TensorView(void* data, std::size_t nbytes, DType dtype, std::span<const std::int64_t> shape,
             Device device = Device::cpu());
  TensorView(void* data, std::size_t nbytes, DType dtype, Shape shape, Device device = Device::cpu())
      : TensorView(data, nbytes, dtype, std::span<const std::int64_t>(shape.begin(), shape.size()), device) {}
  TensorView(void* data, std::size_t nbytes, DType dtype, std::span<const std::int64_t> shape,
             std::span<const std::int64_t> strides, Device device = Device::cpu());

  bool defined() const { return rank_ >= 0; }
  void* data() const { return data_; }
  template <class T>
  T* data_as() const { return static_cast<T*>(data_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int rank() const { return rank_; }
  // Negative dims count from the end, as in Python.
  std::int64_t size(int dim) const { return shape_[wrap(dim)]; }
  std::int64_t stride(int dim) const { return strides_[wrap(dim)]; }
  std::span<const std::int64_t> shape() const { return {shape_.data(), size_t(rank_ < 0 ? 0 : rank_)}; }
  std::span<const std::int64_t> strides() const { return {strides_.data(), size_t(rank_ < 0 ? 0 : rank_)}; }
  std::int64_t numel() const;
  std::size_t element_size() const { return dtype_size(dtype_); }
  // The buffer this view lies in, when known: [extent_begin(), extent_begin() + extent_bytes()).
  bool has_extent() const { return extent_bytes_ >= 0; }
  const void* extent_begin() const { return extent_begin_; }
  std::int64_t extent_bytes() const { return extent_bytes_; }  // -1: unknown (a raw-pointer view)
  bool is_contiguous() const;
  // Only the last dimension must be contiguous everywhere in kvinfer.
  bool last_dim_contiguous() const { return rank_ <= 0 || shape_[rank_ - 1] <= 1 || strides_[rank_ - 1] == 1; }

  // Views sharing this memory.
  TensorView slice(int dim, std::int64_t start, std::int64_t stop) const;  // [start, stop)
  TensorView select(int dim, std::int64_t index) const;                   // drops `dim`
  TensorView unsqueeze(int dim) const;                                    // inserts a size-1 dim
  TensorView with_dtype(DType dtype) const;  // reinterpret (same element size)

  // Pointer to the element at `index` (one per dim).
  void* element_ptr(std::span<const std::int64_t> index) const;

  std::string shape_string() const;  // "[4, 2, 16, 8, 128]"
  std::string describe() const;      // "bfloat16[4, 2, 16, 8, 128] on cpu"

 private:
  int wrap(int dim) const;

  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_ = Device::cpu();
  int rank_ = -1;
  std::array<std::int64_t, kMaxRank> shape_{};
  std::array<std::int64_t, kMaxRank> strides_{};
  const void* extent_begin_ = nullptr;
  std::int64_t extent_bytes_ = -1;
};

// Owning, contiguous, move-only buffer on the CPU or (with the CUDA backend) a GPU.
class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(std::span<const std::int64_t> shape, DType dtype, Device device = Device::cpu());
  static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu()) {
    return empty(std::span<const std::int64_t>(shape.begin(), shape.size()), dtype, device);
  }
  static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(std::span<const std::int64_t> shape, DType dtype, Device device = Device::cpu());

  const TensorView& view() const { return view_; }
  operator const TensorView&() const { return view_; }  // NOLINT: a Tensor is usable wherever a view is
  bool defined() const { return view_.defined(); }
  void* data() const { return view_.data(); }
  template <class T>
  T* data_as() const { return view_.data_as<T>(); }
  DType dtype() const { return view_.dtype(); }
  Device device() const { return view_.device(); }
  std::int64_t size(int dim) const { return view_.size(dim); }
  std::int64_t numel() const { return view_.numel(); }
  std::size_t nbytes() const { return std::size_t(numel()) * view_.element_size(); }

  // A contiguous copy on `device`.
  Tensor to(Device device) const;

 private:
  std::shared_ptr<void> storage_;
  TensorView view_;
};

// Copies src into dst elementwise (same shape and dtype). CPU<->CPU handles any
// strides; transfers to or from a GPU need both sides contiguous.
void copy(const TensorView& dst, const TensorView& src, Stream stream = nullptr);

// Fills every element of `dst` with the bytes of one element.
void fill_bytes(const TensorView& dst, std::uint8_t byte, Stream stream = nullptr);

}  // namespace kvinfer
