// SPDX-License-Identifier: Apache-2.0
// Random test data on the host: byte patterns of any dtype, boolean masks, padded
// (non-contiguous) views and shuffled page tables.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <random>
#include <span>
#include <vector>

#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer::testing {

using Rng = std::mt19937_64;

// Every element of a (possibly strided) host view gets random bytes. Floats may
// become NaN: meant for byte-exact copies, not arithmetic.
void fill_random_bytes(const TensorView& t, Rng& rng);

// Every byte of a tensor's storage, contiguous, random.
Tensor random_bytes(Shape shape, DType dtype, Rng& rng);

// n elements of dtype bool (0/1), each true with probability p_true.
Tensor random_bools(std::int64_t n, Rng& rng, double p_true = 0.5);

// An int32 host tensor [values.size()].
Tensor int32_tensor(std::span<const std::int32_t> values);
inline Tensor int32_tensor(std::initializer_list<std::int32_t> values) {
  return int32_tensor(std::span<const std::int32_t>(values.begin(), values.size()));
}
// bf16 values drawn from N(0, scale^2), on the host.
Tensor random_bf16(Shape shape, Rng& rng, float scale = 1.0f);
std::vector<std::int32_t> to_vector_i32(const TensorView& t);

// A view of shape `shape` inside a larger allocation of shape + pad (per dim), so
// that every stride but the last exceeds the contiguous one. The last dim stays
// contiguous (its padding only widens the row stride).
struct Padded {
  Tensor storage;
  TensorView view;
};
Padded padded(std::span<const std::int64_t> shape, DType dtype, std::span<const std::int64_t> pad);
inline Padded padded(Shape shape, DType dtype, Shape pad) {
  return padded(std::span(shape.begin(), shape.size()), dtype, std::span(pad.begin(), pad.size()));
}

// A host page table for the given kv_lens with shuffled page ids: request i owns
// ceil(kv_len[i] / page_size) distinct pages, and `extra_pages` unused pages are
// mixed in, so num_pages = used + extra_pages.
struct HostPageTable {
  Tensor indptr, indices, last_page_len;
  std::vector<std::int32_t> kv_lens;
  std::int64_t page_size = 1;
  std::int64_t num_pages = 0;
  PageTable view() const { return {indptr, indices, last_page_len}; }
};
HostPageTable random_page_table(std::span<const std::int32_t> kv_lens, std::int64_t page_size,
                                std::int64_t extra_pages, Rng& rng);

}  // namespace kvinfer::testing
