// SPDX-License-Identifier: Apache-2.0
// SpanTimer on the CPU: spans add up per kind, collect() resets, misuse is an error.
// (tests/cuda/test_cuda_pdl.cpp times a kernel of known length with it on a GPU.)
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/span_timer.hpp"
#include "testing/expect_error.hpp"

namespace kvinfer::testing {
namespace {

using detail::SpanTimer;

TEST(SpanTimer, SpansAddUpPerKindAndCollectResets) {
  SpanTimer t(Device::cpu(), 2);
  t.begin(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  t.end();
  t.begin(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  t.end();
  t.begin(0);
  t.end();
  const std::vector<double> s = t.collect();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_GE(s[1], 0.040);
  EXPECT_LT(s[1], 2.0);
  EXPECT_LT(s[0], 0.010);
  const std::vector<double> again = t.collect();
  EXPECT_EQ(again, (std::vector<double>{0.0, 0.0}));
}

TEST(SpanTimer, MisuseIsAnError) {
  SpanTimer t(Device::cpu(), 2);
  expect_error([&] { t.begin(2); }, "kind", "[0, 2)");
  expect_error([&] { t.end(); }, "span", "no span is open");
  t.begin(0);
  expect_error([&] { t.begin(1); }, "kind", "a span is open");
  expect_error([&] { t.collect(); }, "span", "still open");
  t.end();
  EXPECT_EQ(t.collect().size(), 2u);
}

}  // namespace
}  // namespace kvinfer::testing
