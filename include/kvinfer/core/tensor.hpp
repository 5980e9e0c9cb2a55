// SPDX-License-Identifier: Apache-2.0
// TensorView: a non-owning, strided view of memory on one device (strides in
// elements). Tensor: an owning buffer for programs and tests.
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
