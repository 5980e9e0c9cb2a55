// SPDX-License-Identifier: Apache-2.0
// Attention options: names of the positional encodings and the standard ALiBi slopes.
#include "kvinfer/attention/options.hpp"

#include <array>
#include <cmath>

#include "core/check.hpp"

namespace kvinfer {

namespace {

// The name of an enumerator from its table, "?" for a value outside the enum.
template <class Enum, std::size_t N>
std::string_view enum_name(Enum e, const std::array<std::string_view, N>& names) {
  const auto i = std::size_t(e);
  return i < N ? names[i] : "?";
}

}  // namespace

// FlashInfer's names (PosEncodingMode; the prefill backends), so that logs and CLI flags
// read the same. In the order of the enumerators.
std::string_view pos_encoding_name(PosEncoding p) {
  return enum_name(p, std::array<std::string_view, 3>{"NONE", "ROPE_LLAMA", "ALIBI"});
}

std::string_view prefill_backend_name(PrefillBackend b) {
  return enum_name(b, std::array<std::string_view, 3>{"auto", "fa2", "fa3"});
}

std::vector<float> alibi_slopes(int num_heads) {
  detail::require_v(num_heads >= 1, "alibi_slopes", "num_heads", num_heads, "must be >= 1");
  int n = 1;  // largest power of two <= num_heads
  while (n <= num_heads / 2) n *= 2;
  std::vector<float> slopes;
  slopes.reserve(std::size_t(num_heads));
  // Each slope is one exp2 of an exact exponent in double (not a running product),
  // so the float result is the correctly rounded 2^x.
  for (int i = 0; i < n; ++i) slopes.push_back(float(std::exp2(-8.0 * (i + 1) / n)));
  // Not a power of two: the odd terms of the series for 2n, 2^(-4(2i+1)/n).
  for (int i = 0; i < num_heads - n; ++i) slopes.push_back(float(std::exp2(-4.0 * (2 * i + 1) / n)));
  return slopes;
}

}  // namespace kvinfer
