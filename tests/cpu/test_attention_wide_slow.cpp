// SPDX-License-Identifier: Apache-2.0
// The wide random grid of attention cases on the CPU (label `slow`).
#include <gtest/gtest.h>

#include "testing/case_test.hpp"

namespace kvinfer::testing {
namespace {

using CpuAttentionWide = CaseTest<AttentionCase>;

TEST_P(CpuAttentionWide, MatchesOracle) { expect_matches_oracle(Device::cpu()); }

INSTANTIATE_TEST_SUITE_P(Wide, CpuAttentionWide, ::testing::ValuesIn(wide_attention_case_list(150, 7)), CaseName());

}  // namespace
}  // namespace kvinfer::testing
