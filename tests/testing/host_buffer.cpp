// SPDX-License-Identifier: Apache-2.0
#include "testing/host_buffer.hpp"

#include <cmath>

#include "testing/random.hpp"

namespace kvinfer::testing {

double to_double(const void* p, DType t) {
  switch (t) {
    case DType::kF32: return *static_cast<const float*>(p);
    case DType::kF16: return f16_to_f32(*static_cast<const std::uint16_t*>(p));
    case DType::kBF16: return bf16_to_f32(*static_cast<const std::uint16_t*>(p));
    case DType::kE4M3: return e4m3_to_f32(*static_cast<const std::uint8_t*>(p));
    case DType::kE5M2: return e5m2_to_f32(*static_cast<const std::uint8_t*>(p));
    default: return std::nan("");
  }
}

void from_float(float x, DType t, void* p) {
  switch (t) {
    case DType::kF32: *static_cast<float*>(p) = x; return;
    case DType::kF16: *static_cast<std::uint16_t*>(p) = f32_to_f16(x); return;
    case DType::kBF16: *static_cast<std::uint16_t*>(p) = f32_to_bf16(x); return;
    case DType::kE4M3: *static_cast<std::uint8_t*>(p) = f32_to_e4m3(x); return;
    case DType::kE5M2: *static_cast<std::uint8_t*>(p) = f32_to_e5m2(x); return;
    default: return;
  }
}

float round_to(float x, DType t) {
  std::uint8_t buf[4];
  from_float(x, t, buf);
  return float(to_double(buf, t));
}

char* element_at(const TensorView& t, std::initializer_list<std::int64_t> idx) {
  return static_cast<char*>(t.element_ptr(std::span(idx.begin(), idx.size())));
}

void fill_normal(const TensorView& t, std::mt19937_64& rng, float std_dev) {
  std::normal_distribution<float> nd(0.0f, std_dev);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(t.rank()), 0);
  const std::int64_t n = t.numel();
  for (std::int64_t e = 0; e < n; ++e) {
    std::int64_t rem = e;
    for (int d = t.rank() - 1; d >= 0; --d) {
      idx[std::size_t(d)] = rem % t.size(d);
      rem /= t.size(d);
    }
    from_float(nd(rng), t.dtype(), t.element_ptr(idx));
  }
}

void HostBuffer::make(std::span<const std::int64_t> shape, DType dtype, std::span<const std::int64_t> pad) {
  if (!pad.empty()) {
    Padded p = padded(shape, dtype, pad);
    host_storage = std::move(p.storage);
    host = p.view;
  } else {
    host_storage = Tensor::empty(shape, dtype);
    host = host_storage.view();
  }
  fill_bytes(host_storage, 0xFF);
}

void HostBuffer::to_device(Device d) {
  if (d.is_cpu()) {
    device = host;
    return;
  }
  device_storage = host_storage.to(d);
  const auto offset = static_cast<const char*>(host.data()) - static_cast<const char*>(host_storage.data());
  device = TensorView(static_cast<char*>(device_storage.data()) + offset, host.dtype(), host.shape(), host.strides(), d);
}

void HostBuffer::to_host() {
  if (device_storage.defined()) copy(host_storage, device_storage);
}

}  // namespace kvinfer::testing
