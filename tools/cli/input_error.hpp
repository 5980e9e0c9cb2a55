// SPDX-License-Identifier: Apache-2.0
// Bad input to a command (a malformed trace, an unknown preset, a shape or pool
// that cannot work): the program prints the message and exits with kExitBadInput.
#pragma once

#include <stdexcept>
#include <string>

namespace kvinfer::cli {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kvinfer::cli
