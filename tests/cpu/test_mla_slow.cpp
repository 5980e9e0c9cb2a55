// SPDX-License-Identifier: Apache-2.0
// The wide grid of BatchMLAPagedAttention cases on the CPU (label `slow`): long KV
// with many heads, the pairs the CI list cannot afford, and random cases.
#include <gtest/gtest.h>

#include "testing/mla_case.hpp"

namespace kvinfer::testing {
namespace {

class CpuMLAWide : public ::testing::TestWithParam<MLACase> {};

TEST_P(CpuMLAWide, MatchesOracle) {
  const MLACase& c = GetParam();
  const CaseReport r = run_mla_case(c, Device::cpu());
  EXPECT_TRUE(r.ok()) << c.describe() << "\n" << r.summary();
}

INSTANTIATE_TEST_SUITE_P(Wide, CpuMLAWide, ::testing::ValuesIn(wide_mla_case_list(40, 17)),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kvinfer::testing
