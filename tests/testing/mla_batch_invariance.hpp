// SPDX-License-Identifier: Apache-2.0
// Batch invariance of a fixed-split MLA plan, on any device: with a fixed split size
// a request's output does not depend on its neighbours in the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer::testing {

struct MLABatchInvariance {
  std::vector<std::int32_t> qo_lens, kv_lens;  // per request
  std::int64_t num_heads = 16;
  bool causal = false;
  std::int64_t fixed_split_size = 32;
  std::size_t alone = 1;  // the request planned by itself
  std::uint64_t seed = 11;
};

// Plans and runs the whole batch on `device` (bf16, a combined cache of pages of 16,
// shuffled page ids), then request `alone` by itself (its slices of q, the page table
// and kv_len): its out and lse must be the same bytes.
void expect_mla_batch_invariance(const MLABatchInvariance& c, Device device);

}  // namespace kvinfer::testing
