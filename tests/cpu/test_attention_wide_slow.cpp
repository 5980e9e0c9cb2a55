// SPDX-License-Identifier: Apache-2.0
// The wide random grid of attention cases on the CPU (label `slow`).
#include <gtest/gtest.h>

#include "testing/attention_case.hpp"

namespace kvinfer::testing {
namespace {

class CpuAttentionWide : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CpuAttentionWide, MatchesOracle) {
  const AttentionCase& c = GetParam();
  const CaseReport r = run_attention_case(c, Device::cpu());
  EXPECT_TRUE(r.ok()) << c.describe() << "\n" << r.summary();
}

INSTANTIATE_TEST_SUITE_P(Wide, CpuAttentionWide, ::testing::ValuesIn(wide_attention_case_list(150, 7)),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kvinfer::testing
