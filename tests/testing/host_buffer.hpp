// SPDX-License-Identifier: Apache-2.0
// Host-side helpers of the attention harnesses: element values of any float dtype
// as double/float, and a poisoned host buffer (contiguous or padded) with a device
// twin of the same strides.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <random>
#include <span>
#include <vector>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer::testing {

// The value of one element of dtype f32/f16/bf16/e4m3/e5m2 at p (NaN for other dtypes).
double to_double(const void* p, DType t);
// Stores x rounded to nearest even into one element of dtype t at p.
void from_float(float x, DType t, void* p);
// x rounded to dtype t and back.
float round_to(float x, DType t);
// Address of element idx of a view.
char* element_at(const TensorView& t, std::initializer_list<std::int64_t> idx);
// Every element of t drawn from N(0, 1), stored in t's dtype.
void fill_normal(const TensorView& t, std::mt19937_64& rng, float std_dev = 1.0f);

// A host tensor, poisoned with 0xFF bytes (NaN in every float format), and for a
// GPU run a device copy with the same offset and strides.
struct HostBuffer {
  Tensor host_storage;
  TensorView host;
  Tensor device_storage;
  TensorView device;

  // pad (per dim, may be empty): the view sits inside a larger allocation, so its
  // strides exceed the contiguous ones; the last dim stays contiguous.
  void make(std::span<const std::int64_t> shape, DType dtype, std::span<const std::int64_t> pad = {});
  void make(Shape shape, DType dtype, std::vector<std::int64_t> pad = {}) {
    make(std::span(shape.begin(), shape.size()), dtype, pad);
  }
  void to_device(Device d);
  void to_host();  // copies the device storage back (no-op for a CPU run)
};

}  // namespace kvinfer::testing
