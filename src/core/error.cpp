// SPDX-License-Identifier: Apache-2.0
#include "kvinfer/core/error.hpp"

#include <fmt/format.h>

namespace kvinfer {

Error::Error(std::string_view op, std::string_view argument, std::string_view value,
             std::string_view rule)
    : std::runtime_error(fmt::format("{}: {} = {}: {}", op, argument, value, rule)),
      op_(op),
      argument_(argument),
      value_(value),
      rule_(rule) {}

}  // namespace kvinfer
