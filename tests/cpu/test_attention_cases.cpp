// SPDX-License-Identifier: Apache-2.0
// The CPU backend against the float64 oracle over the pairwise case list.
#include <gtest/gtest.h>

#include "testing/case_test.hpp"

namespace kvinfer::testing {
namespace {

using CpuAttentionCase = CaseTest<AttentionCase>;

TEST_P(CpuAttentionCase, MatchesOracle) { expect_matches_oracle(Device::cpu()); }

INSTANTIATE_TEST_SUITE_P(Cases, CpuAttentionCase, ::testing::ValuesIn(attention_case_list()), CaseName());

}  // namespace
}  // namespace kvinfer::testing
