// SPDX-License-Identifier: Apache-2.0
// Batch invariance (docs/semantics.md, "Batch invariance"): with a fixed split size or
// splitting disabled, a request's output and LSE are bitwise the same whatever batch
// it runs in. The check runs a case's batch, each request alone and the batch without
// its last request, on the same inputs, and compares bit for bit.
#pragma once

#include <string>

#include "testing/attention_case.hpp"

namespace kvinfer::testing {

// The case list with the split fixed (alternately a fixed split size and no split).
std::vector<AttentionCase> invariance_case_list();

// Empty when every request's rows are bitwise equal in every batch; else what differed.
std::string batch_invariance_failure(const AttentionCase& c, Device device);

}  // namespace kvinfer::testing
