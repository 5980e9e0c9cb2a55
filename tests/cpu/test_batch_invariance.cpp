// SPDX-License-Identifier: Apache-2.0
// Batch invariance on the CPU: with a fixed or disabled split, each request of every
// case of the list gives bitwise the same rows alone, in its batch, and in the batch
// without the last request (testing/batch_invariance.hpp).
#include <gtest/gtest.h>

#include "testing/batch_invariance.hpp"
#include "testing/case_test.hpp"

namespace kvinfer::testing {
namespace {

using CpuBatchInvariance = ::testing::TestWithParam<AttentionCase>;

TEST_P(CpuBatchInvariance, EachRequestAloneEqualsItsRowsInTheBatch) {
  const AttentionCase& c = GetParam();
  EXPECT_EQ(batch_invariance_failure(c, Device::cpu()), "") << c.describe();
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuBatchInvariance, ::testing::ValuesIn(invariance_case_list()), CaseName());

}  // namespace
}  // namespace kvinfer::testing
