// SPDX-License-Identifier: Apache-2.0
// The wide grids on the CPU (label `slow`): a random grid of attention cases, and
// of BatchMLAPagedAttention cases (long KV with many heads, the pairs the CI list
// cannot afford, and random cases).
#include <gtest/gtest.h>

#include "testing/case_test.hpp"

namespace kvinfer::testing {
namespace {

using CpuAttentionWide = CaseTest<AttentionCase>;
using CpuMLAWide = CaseTest<MLACase>;

TEST_P(CpuAttentionWide, MatchesOracle) { expect_matches_oracle(Device::cpu()); }
TEST_P(CpuMLAWide, MatchesOracle) { expect_matches_oracle(Device::cpu()); }

INSTANTIATE_TEST_SUITE_P(Wide, CpuAttentionWide, ::testing::ValuesIn(wide_attention_case_list(150, 7)), CaseName());
INSTANTIATE_TEST_SUITE_P(Wide, CpuMLAWide, ::testing::ValuesIn(wide_mla_case_list(40, 17)), CaseName());

}  // namespace
}  // namespace kvinfer::testing
