// SPDX-License-Identifier: Apache-2.0
// Division by a run-time constant through a multiply-high and a shift, for the index
// arithmetic of flat-indexed kernels (a plain 32-bit division is ~20 instructions).
#pragma once

#include <cstdint>

#include "core/host_device.hpp"

namespace kvinfer::cuda {

// Exact for dividends in [0, 2^31) and divisors in [1, 2^31) (Granlund-Montgomery with
// N = 31: multiplier ceil(2^(31 + l) / d), l = ceil(log2 d), fits 32 bits).
struct FastDivmod {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 0;  // 0 encodes divisor 1
  std::uint32_t shift = 0;

  FastDivmod() = default;
  explicit FastDivmod(std::uint32_t d) : divisor(d) {
    if (d <= 1) return;
    std::uint32_t l = 0;
    while ((std::uint64_t(1) << l) < d) ++l;
    const std::uint64_t p = 31 + l;
    multiplier = std::uint32_t(((std::uint64_t(1) << p) + d - 1) / d);
    shift = std::uint32_t(p - 32);
  }

  KVINFER_HD std::uint32_t div(std::uint32_t n) const {
    if (multiplier == 0) return n;
#if defined(__CUDA_ARCH__)
    return __umulhi(n, multiplier) >> shift;
#else
    return std::uint32_t((std::uint64_t(n) * multiplier) >> 32) >> shift;
#endif
  }
  // Returns the quotient; the remainder goes to *rem.
  KVINFER_HD std::uint32_t divmod(std::uint32_t n, std::uint32_t* rem) const {
    const std::uint32_t q = div(n);
    *rem = n - q * divisor;
    return q;
  }
};

}  // namespace kvinfer::cuda
