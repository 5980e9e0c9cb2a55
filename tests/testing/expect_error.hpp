// SPDX-License-Identifier: Apache-2.0
// Asserts that a call throws kvinfer::Error naming a given argument, in both
// e.argument() and the message; and the same for a table of broken inputs.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
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

// The same, and the error names the operation `op`: e.op() and the message's start
// ("<op>: "), i.e. the function the caller called, not one it forwards to.
template <class F>
void expect_error_of(std::string_view op, F&& call, std::string_view argument,
                     std::string_view also_in_message = {}) {
  try {
    call();
    ADD_FAILURE() << "expected kvinfer::Error from " << op << " naming " << argument << ", nothing was thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.op(), op) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind(std::string(op) + ": ", 0), 0u) << e.what();
    EXPECT_EQ(e.argument(), argument) << e.what();
    if (!also_in_message.empty()) {
      EXPECT_NE(std::string(e.what()).find(also_in_message), std::string::npos) << e.what();
    }
  }
}

// The call w.plan(a) for a copy a of valid plan arguments that `edit` changed: what
// expect_error takes, so that each rejected plan argument is one line.
template <class W, class Args, class Edit>
auto plan_edited(W& w, const Args& args, Edit&& edit) {
  Args a = args;
  edit(a);
  return [a, &w] { w.plan(a); };
}

// One input broken in a valid set-up: `edit` breaks it, after which the set-up's
// run() must throw kvinfer::Error naming `argument` (and `also_in_message`).
template <class Setup>
struct BrokenInput {
  std::function<void(Setup&)> edit;
  std::string_view argument;
  std::string_view also_in_message = {};
};

// Each case on a fresh Setup (a struct whose members are a valid call's arguments).
template <class Setup>
void expect_errors(std::initializer_list<BrokenInput<Setup>> cases) {
  for (const BrokenInput<Setup>& c : cases) {
    SCOPED_TRACE(c.argument);
    Setup s;
    c.edit(s);
    expect_error([&] { s.run(); }, c.argument, c.also_in_message);
  }
}

}  // namespace kvinfer::testing
