// SPDX-License-Identifier: Apache-2.0
// The wide grid of BatchMLAPagedAttention cases on the CPU (label `slow`): long KV
// with many heads, the pairs the CI list cannot afford, and random cases.
#include <gtest/gtest.h>

#include "testing/case_test.hpp"

namespace kvinfer::testing {
namespace {

using CpuMLAWide = CaseTest<MLACase>;

TEST_P(CpuMLAWide, MatchesOracle) { expect_matches_oracle(Device::cpu()); }

INSTANTIATE_TEST_SUITE_P(Wide, CpuMLAWide, ::testing::ValuesIn(wide_mla_case_list(40, 17)), CaseName());

}  // namespace
}  // namespace kvinfer::testing
