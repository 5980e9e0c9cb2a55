// SPDX-License-Identifier: Apache-2.0
// One cascade test case on any device: levels of shared and unique KV segments in
// one page pool, run through MultiLevelCascadeAttention and compared with the
// float64 oracle over each request's concatenated KV (levels in order).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer::testing {

// A level: subtrees, each with a segment of KV and a range of requests.
struct LevelSpec {
  std::vector<int> first_request;  // per subtree; subtree s covers requests [first[s], first[s+1])
  std::vector<std::int32_t> lens;  // per subtree
};

// How a GPU case executes the wrapper's run, given as a call that enqueues it on a
// stream: by default directly on the default stream; a test may capture it into a
// CUDA graph instead and launch that.
using RunExecutor = std::function<void(const std::function<void(Stream)>& run)>;

// Runs one cascade through `wrapper` (a fresh one on `device` when null) and checks
// O and LSE against the oracle (fp16, 8 qo / 2 KV heads, head_dim 64, page 16).
void run_cascade_case(const std::vector<LevelSpec>& levels, const std::vector<std::int32_t>& qo_lens,
                      AttentionOptions options, std::uint64_t seed, MultiLevelCascadeAttention* wrapper = nullptr,
                      Device device = Device::cpu(), const RunExecutor& execute = {});

}  // namespace kvinfer::testing
