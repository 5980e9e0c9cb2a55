// SPDX-License-Identifier: Apache-2.0
// The parameterised test of a case list: one fixture for attention and MLA cases,
// which runs the case on a device and expects it within the oracle's tolerance, and
// the gtest name of a case (its name; name_cases makes the names of a list unique).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "testing/attention_case.hpp"
#include "testing/mla_case.hpp"

namespace kvinfer::testing {

inline CaseReport run_case(const AttentionCase& c, Device device) {
  return run_attention_case(c, device);
}
inline CaseReport run_case(const MLACase& c, Device device) {
  return run_mla_case(c, device);
}

template <class Case>
class CaseTest : public ::testing::TestWithParam<Case> {
 protected:
  void expect_matches_oracle(Device device) const {
    const Case& c = this->GetParam();
    const CaseReport r = run_case(c, device);
    EXPECT_TRUE(r.ok()) << c.describe() << "\n" << r.summary();
  }
};

struct CaseName {
  template <class Case>
  std::string operator()(const ::testing::TestParamInfo<Case>& info) const {
    return info.param.name;
  }
};

}  // namespace kvinfer::testing
