// SPDX-License-Identifier: Apache-2.0
// What the fuzzers share: turning libFuzzer's bytes into the sizes, index arrays and
// tensors of a call. Sizes the harness allocates stay small (a few hundred KiB at
// most) so that each input runs in well under a millisecond; the values handed to
// the library as arguments (head counts, lengths, indices) range over everything an
// int can hold, since rejecting them is the library's job.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <vector>

#include "kvinfer/core/error.hpp"
#include "kvinfer/core/tensor.hpp"

namespace kvinfer::fuzz {

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : fdp_(data, size) {}

  bool flag() { return fdp_.ConsumeBool(); }
  template <class T>
  T in(T lo, T hi) { return fdp_.ConsumeIntegralInRange<T>(lo, hi); }
  float real(float lo, float hi) { return fdp_.ConsumeFloatingPointInRange<float>(lo, hi); }
  std::size_t remaining() { return fdp_.remaining_bytes(); }

  // Mostly a value in [lo, hi]; now and then one at the edges of int32/int64, which
  // the library must reject (or handle) without overflowing.
  std::int64_t count(std::int64_t lo, std::int64_t hi) {
    if (in<int>(0, 15) != 0) return in<std::int64_t>(lo, hi);
    static constexpr std::int64_t kEdges[] = {0,
                                              -1,
                                              std::numeric_limits<std::int32_t>::max(),
                                              std::numeric_limits<std::int32_t>::max() - 31,
                                              std::numeric_limits<std::int32_t>::min(),
                                              std::int64_t(1) << 31,
                                              std::int64_t(1) << 40,
                                              std::numeric_limits<std::int64_t>::max(),
                                              std::numeric_limits<std::int64_t>::min()};
    return kEdges[in<std::size_t>(0, std::size(kEdges) - 1)];
  }
  std::int32_t count32(std::int32_t lo, std::int32_t hi) {
    const std::int64_t v = count(lo, hi);
    return std::int32_t(std::uint32_t(std::uint64_t(v)));  // the edges wrap to int32 edges
  }

  // An enum's value: almost always a valid one, sometimes any byte.
  template <class E>
  E enumerator(int num_values) {
    return E(in<int>(0, 31) != 0 ? in<int>(0, num_values - 1) : in<int>(0, 255));
  }

  // Lengths that sum to what the harness can afford.
  std::vector<std::int32_t> lengths(int n, std::int32_t max_each) {
    std::vector<std::int32_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = in<std::int32_t>(0, max_each);
    return v;
  }

  // Now and then one entry of `v` replaced by a value the library must reject.
  void maybe_corrupt(std::vector<std::int32_t>& v) {
    if (v.empty() || in<int>(0, 7) != 0) return;
    v[in<std::size_t>(0, v.size() - 1)] = count32(-4, 64);
  }

  std::uint64_t seed() { return fdp_.ConsumeIntegral<std::uint64_t>(); }

 private:
  FuzzedDataProvider fdp_;
};

inline std::vector<std::int32_t> indptr_of(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> p{0};
  for (std::int32_t n : lengths) p.push_back(p.back() + n);
  return p;
}

// An int32 host tensor holding exactly `v` (a view of it has the right extent, so
// reading past the end is an ASan report).
inline Tensor int32_tensor(const std::vector<std::int32_t>& v) {
  Tensor t = Tensor::empty({std::int64_t(v.size())}, DType::kI32);
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(std::int32_t));
  return t;
}

// A tensor whose bytes follow a cheap generator: every bit pattern of the dtype
// (NaN, inf, subnormals) shows up across inputs, which the kernels must survive.
inline Tensor filled(std::span<const std::int64_t> shape, DType dtype, std::uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<std::uint8_t*>(t.data());
  std::uint64_t x = seed | 1;
  for (std::size_t i = 0; i < t.nbytes(); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = std::uint8_t(x >> 32);
  }
  return t;
}
inline Tensor filled(Shape shape, DType dtype, std::uint64_t seed) {
  return filled(std::span<const std::int64_t>(shape.begin(), shape.size()), dtype, seed);
}

inline std::int64_t product(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

// Runs one input: a kvinfer::Error is the library refusing it (fine); any other
// exception escapes to libFuzzer, which reports it as a crash.
template <class F>
int run_one(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
  return 0;
}

// One input of a harness with several targets: its first value picks the target.
// The seed corpora keep their meaning only while `targets` keeps its order.
inline int run_one_of(const std::uint8_t* data, std::size_t size, std::initializer_list<void (*)(Input&)> targets) {
  Input in(data, size);
  const int which = in.in<int>(0, int(targets.size()) - 1);
  return run_one([&] { targets.begin()[which](in); });
}

}  // namespace kvinfer::fuzz
