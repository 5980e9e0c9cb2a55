// SPDX-License-Identifier: Apache-2.0
// Vectors of N bytes (16, 8, 4, 2, 1) with aligned global loads and stores: the unit
// of every copy kernel, picked at launch from the alignment of pointers and strides.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "cuda/common/ptx.cuh"

namespace kvinfer::cuda {

template <int kBytes>
struct RawVec;
template <>
struct RawVec<16> {
  using Type = uint4;
};
template <>
struct RawVec<8> {
  using Type = uint2;
};
template <>
struct RawVec<4> {
  using Type = std::uint32_t;
};
template <>
struct RawVec<2> {
  using Type = std::uint16_t;
};
template <>
struct RawVec<1> {
  using Type = std::uint8_t;
};

// Read-only load of kBytes bytes from a kBytes-aligned address (non-coherent path:
// the kernel must not write this memory).
template <int kBytes>
__device__ __forceinline__ typename RawVec<kBytes>::Type load_ro(const void* p) {
  if constexpr (kBytes == 16) {
    return ptx::ld_nc_na_v4(p);
  } else if constexpr (kBytes == 8) {
    return ptx::ld_nc_na_v2(p);
  } else {
    return __ldg(static_cast<const typename RawVec<kBytes>::Type*>(p));
  }
}

template <int kBytes>
__device__ __forceinline__ void store(void* p, typename RawVec<kBytes>::Type v) {
  if constexpr (kBytes == 16) {
    ptx::st_v4(p, v);
  } else if constexpr (kBytes == 8) {
    ptx::st_v2(p, v);
  } else {
    *static_cast<typename RawVec<kBytes>::Type*>(p) = v;
  }
}

// kN elements of T packed in one aligned register vector, for element-wise kernels.
template <class T, int kN>
struct alignas(sizeof(T) * kN) Vec {
  T v[kN];
};

// Coherent load (the memory may be written by this kernel, e.g. in place).
template <class T, int kN>
__device__ __forceinline__ Vec<T, kN> load_vec(const T* p) {
  Vec<T, kN> r;
  if constexpr (sizeof(T) * kN == 16) {
    const uint4 raw = ptx::ld_v4(p);
    static_assert(sizeof(r) == sizeof(raw));
    __builtin_memcpy(&r, &raw, 16);
  } else {
    r = *reinterpret_cast<const Vec<T, kN>*>(p);
  }
  return r;
}

template <class T, int kN>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, kN>& x) {
  if constexpr (sizeof(T) * kN == 16) {
    uint4 raw;
    __builtin_memcpy(&raw, &x, 16);
    ptx::st_v4(p, raw);
  } else {
    *reinterpret_cast<Vec<T, kN>*>(p) = x;
  }
}

// The widest power-of-two byte width <= max_bytes dividing every value given
// (addresses, byte strides, row sizes): the vector width that keeps every access aligned.
inline int common_vec_bytes(int max_bytes, std::initializer_list<std::uint64_t> values) {
  std::uint64_t bits = 0;
  for (std::uint64_t v : values) bits |= v;
  int bytes = max_bytes;
  while (bytes > 1 && (bits & std::uint64_t(bytes - 1)) != 0) bytes /= 2;
  return bytes;
}

}  // namespace kvinfer::cuda
