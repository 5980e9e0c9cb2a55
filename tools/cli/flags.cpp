// SPDX-License-Identifier: Apache-2.0
#include "flags.hpp"

namespace kvinfer::cli {

std::pair<std::int32_t, std::int32_t> parse_int_range(const std::string& flag, const std::string& text,
                                                      const Bounds<std::int32_t>& b) {
  const auto fail = [&] {
    return InputError(fmt::format("{} = {}: must be N or MIN:MAX with integers {} and MIN <= MAX", flag, text,
                                  describe_bounds(b).substr(std::string_view("an integer ").size())));
  };
  const auto colon = text.find(':');
  const auto one = [&](std::string_view s) {
    try {
      return parse_number(flag, s, b);
    } catch (const InputError&) {
      throw fail();
    }
  };
  if (colon == std::string::npos) {
    const std::int32_t v = one(text);
    return {v, v};
  }
  const std::int32_t lo = one(std::string_view(text).substr(0, colon));
  const std::int32_t hi = one(std::string_view(text).substr(colon + 1));
  if (lo > hi) throw fail();
  return {lo, hi};
}

}  // namespace kvinfer::cli
