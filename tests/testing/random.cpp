// SPDX-License-Identifier: Apache-2.0
#include "testing/random.hpp"

#include "kvinfer/core/float_convert.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace kvinfer::testing {

void fill_random_bytes(const TensorView& t, Rng& rng) {
  if (t.numel() == 0) return;
  // Random contiguous bytes copied through the (strided) view.
  Tensor src = random_bytes({t.numel()}, t.dtype(), rng);
  std::array<std::int64_t, kMaxRank> strides{};
  std::int64_t stride = 1;
  for (int d = t.rank() - 1; d >= 0; --d) {
    strides[std::size_t(d)] = stride;
    stride *= t.size(d);
  }
  copy(t, TensorView(src.data(), t.dtype(), t.shape(), std::span(strides.data(), std::size_t(t.rank()))));
}

Tensor random_bytes(Shape shape, DType dtype, Rng& rng) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<std::uint8_t*>(t.data());
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] = std::uint8_t(byte(rng));
  return t;
}

Tensor random_bools(std::int64_t n, Rng& rng, double p_true) {
  Tensor t = Tensor::empty({n}, DType::kBool);
  std::bernoulli_distribution bit(p_true);
  auto* p = t.data_as<std::uint8_t>();
  for (std::int64_t i = 0; i < n; ++i) p[i] = bit(rng) ? 1 : 0;
  return t;
}

Tensor int32_tensor(std::span<const std::int32_t> values) {
  Tensor t = Tensor::empty({std::int64_t(values.size())}, DType::kI32);
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(std::int32_t));
  return t;
}

std::vector<std::int32_t> to_vector_i32(const TensorView& t) {
  std::vector<std::int32_t> v(std::size_t(t.numel()));
  if (!v.empty()) copy(TensorView(v.data(), DType::kI32, {t.numel()}), t);
  return v;
}

Padded padded(std::span<const std::int64_t> shape, DType dtype, std::span<const std::int64_t> pad) {
  std::vector<std::int64_t> full(shape.begin(), shape.end());
  for (std::size_t d = 0; d < full.size(); ++d) full[d] += pad[d];
  Padded out;
  out.storage = Tensor::empty(std::span<const std::int64_t>(full), dtype);
  out.view = out.storage.view();
  for (std::size_t d = 0; d < shape.size(); ++d) out.view = out.view.slice(int(d), 0, shape[d]);
  return out;
}

HostPageTable random_page_table(std::span<const std::int32_t> kv_lens, std::int64_t page_size,
                                std::int64_t extra_pages, Rng& rng) {
  HostPageTable t;
  t.page_size = page_size;
  t.kv_lens.assign(kv_lens.begin(), kv_lens.end());
  std::vector<std::int32_t> indptr{0}, last;
  for (std::int32_t len : kv_lens) {
    const std::int32_t pages = std::int32_t((len + page_size - 1) / page_size);
    indptr.push_back(indptr.back() + pages);
    last.push_back(pages == 0 ? 0 : std::int32_t(len - (pages - 1) * page_size));
  }
  t.num_pages = indptr.back() + extra_pages;
  std::vector<std::int32_t> ids(std::size_t(t.num_pages));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(std::size_t(indptr.back()));
  t.indptr = int32_tensor(indptr);
  t.indices = int32_tensor(ids);
  t.last_page_len = int32_tensor(last);
  return t;
}

Tensor random_bf16(Shape shape, Rng& rng, float scale) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  std::normal_distribution<float> nd(0.0f, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data_as<std::uint16_t>()[i] = f32_to_bf16(nd(rng));
  return t;
}

}  // namespace kvinfer::testing
