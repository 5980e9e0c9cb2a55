// SPDX-License-Identifier: Apache-2.0
// Asserts that a call throws kvinfer::Error naming a given argument, in both
// e.argument() and the message.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "kvinfer/core/error.hpp"

namespace kvinfer::testing {

// `also_in_message`, when given, must appear in what() too (e.g. "int32").
template <class F>
void expect_error(F&& call, std::string_view argument, std::string_view also_in_message = {}) {
  try {
    call();
    ADD_FAILURE() << "expected kvinfer::Error naming " << argument << ", nothing was thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
    if (!also_in_message.empty()) {
      EXPECT_NE(std::string(e.what()).find(also_in_message), std::string::npos) << e.what();
    }
  }
}

}  // namespace kvinfer::testing
