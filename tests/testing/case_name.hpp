// SPDX-License-Identifier: Apache-2.0
// Test names made from what a case is (wrapper, dtypes, head dim, GQA group, page
// size, mask, ...), e.g. `paged_bf16_hd128_g4_ps16_causal_b3_kv97`, so that a ctest
// or gtest name says the case and stays the same whatever the list's order. Every
// name is a valid gtest name (letters, digits, '_').
#pragma once

#include <string>
#include <vector>

#include "testing/attention_case.hpp"
#include "testing/mla_case.hpp"

namespace kvinfer::testing {

std::string case_name(const AttentionCase& c);
std::string case_name(const MLACase& c);

// Gives every case without a name its case_name(); where two cases end with the same
// name, appends to each a short hash of its full description (seed included), which
// does not depend on where the case stands in the list. Throws if names still repeat.
void name_cases(std::vector<AttentionCase>& cases);
void name_cases(std::vector<MLACase>& cases);

}  // namespace kvinfer::testing
