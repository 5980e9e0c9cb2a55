// SPDX-License-Identifier: Apache-2.0
// The CPU backend against the float64 oracle over the pairwise case list.
#include <gtest/gtest.h>

#include "testing/attention_case.hpp"

namespace kvinfer::testing {
namespace {

class CpuAttentionCase : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CpuAttentionCase, MatchesOracle) {
  const AttentionCase& c = GetParam();
  const CaseReport r = run_attention_case(c, Device::cpu());
  EXPECT_TRUE(r.ok()) << c.describe() << "\n" << r.summary();
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuAttentionCase, ::testing::ValuesIn(attention_case_list()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kvinfer::testing
