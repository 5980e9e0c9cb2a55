// SPDX-License-Identifier: Apache-2.0
// Batch invariance on the GPU: with a fixed or disabled split, each request of every
// case of the list gives bitwise the same rows alone, in its batch, and in the batch
// without the last request (testing/batch_invariance.hpp). The kernel is then chosen
// from the configuration alone (AttentionProblem::length_free_kernel): a request with
// one query row runs the prefill tile in a batch of prefills and alone.
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_util.hpp"
#include "testing/batch_invariance.hpp"
#include "testing/case_test.hpp"

namespace kvinfer::testing {
namespace {

using CudaBatchInvariance = ::testing::TestWithParam<AttentionCase>;

TEST_P(CudaBatchInvariance, EachRequestAloneEqualsItsRowsInTheBatch) {
  KVINFER_SKIP_WITHOUT_GPU();
  const AttentionCase& c = GetParam();
  std::string failure;
  try {
    failure = batch_invariance_failure(c, Device::cuda(0));
  } catch (const Error& e) {
    // Configurations the CUDA backend does not compile (the CUDA coverage issue).
    const std::string what = e.what();
    if (what.find("no CUDA kernel") != std::string::npos) GTEST_SKIP() << what;
    throw;
  }
  EXPECT_EQ(failure, "") << c.describe();
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBatchInvariance, ::testing::ValuesIn(invariance_case_list()), CaseName());

}  // namespace
}  // namespace kvinfer::testing
