// SPDX-License-Identifier: Apache-2.0
// kvinfer::Error: the one exception type for bad input. Every message names the
// operation, the argument, the value it had and the rule it broke.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace kvinfer {

class Error : public std::runtime_error {
 public:
  // Message: "<op>: <argument> = <value>: <rule>".
  Error(std::string_view op, std::string_view argument, std::string_view value,
        std::string_view rule);

  const std::string& op() const noexcept { return op_; }
  const std::string& argument() const noexcept { return argument_; }
  const std::string& value() const noexcept { return value_; }
  const std::string& rule() const noexcept { return rule_; }

 private:
  std::string op_, argument_, value_, rule_;
};

}  // namespace kvinfer
