// SPDX-License-Identifier: Apache-2.0
// MultiLevelCascadeAttention on the CPU equals attention over each request's
// concatenated KV (levels in order), compared with the float64 oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "kvinfer/kvinfer.hpp"
#include "oracle/oracle.hpp"
#include "testing/cascade_case.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

TEST(CpuCascade, TwoLevelsSharedPrefixDecode) {
  run_cascade_case({{{0}, {300}}, {{0, 1, 2, 3, 4, 5}, {17, 1, 40, 0, 33, 64}}}, {1, 1, 1, 1, 1, 1}, {}, 1);
}

TEST(CpuCascade, TwoLevelsSharedPrefixAppendCausal) {
  run_cascade_case({{{0}, {257}}, {{0, 1, 2}, {37, 20, 5}}}, {37, 3, 5}, {.mask_mode = MaskMode::kCausal}, 2);
}

// The query rows are the newest tokens, so they lie in the last level (qo_len <= its kv_len).
TEST(CpuCascade, ThreeLevelsTwoGroupsSoftCap) {
  run_cascade_case({{{0}, {100}}, {{0, 2}, {45, 70}}, {{0, 1, 2, 3}, {9, 4, 31, 16}}}, {2, 4, 1, 3},
                   {.mask_mode = MaskMode::kCausal, .logits_soft_cap = 20.0f}, 3);
}

TEST(CpuCascade, UnsharedPrefixesAndEmptySegments) {
  // Level 0 has one subtree per request (nothing shared), one of them empty.
  run_cascade_case({{{0, 1, 2}, {64, 0, 19}}, {{0, 1, 2}, {8, 0, 1}}}, {1, 1, 1}, {}, 4);
}

// CUDA-graph mode: one wrapper with fixed capacities re-planned for other batches.
TEST(CpuCascade, FixedCapacityReplans) {
  MultiLevelCascadeAttention w(2, Device::cpu(), KVLayout::kNHD,
                               {Capacity{.max_batch = 4, .max_qo_tokens = 64, .max_kv = 64},
                                Capacity{.max_batch = 16, .max_qo_tokens = 64, .max_kv = 256}});
  run_cascade_case({{{0}, {300}}, {{0, 1, 2, 3, 4, 5}, {17, 1, 40, 0, 33, 64}}}, {1, 1, 1, 1, 1, 1}, {}, 5, &w);
  run_cascade_case({{{0, 2}, {64, 200}}, {{0, 1, 2, 3}, {5, 9, 31, 16}}}, {2, 4, 1, 3},
                   {.mask_mode = MaskMode::kCausal}, 6, &w);
  run_cascade_case({{{0}, {10}}, {{0}, {20}}}, {1}, {}, 7, &w);
}

TEST(CpuCascade, RejectsPositionalEncodingsAndBadLevels) {
  MultiLevelCascadeAttention w(2);
  std::vector<std::int32_t> qi{0, 1};
  Tensor qo = int32_tensor(qi), ip = int32_tensor(std::vector<std::int32_t>{0, 1}),
         ids = int32_tensor(std::vector<std::int32_t>{0}), last = int32_tensor(std::vector<std::int32_t>{3});
  CascadePlanArgs args{.levels = {{qo, {ip, ids, last}}, {qo, {ip, ids, last}}}, .num_qo_heads = 4,
                       .num_kv_heads = 4, .head_dim = 64, .page_size = 16};
  args.options.pos_encoding = PosEncoding::kRopeLlama;
  expect_error([&] { w.plan(args); }, "options.pos_encoding");
  args.options.pos_encoding = PosEncoding::kNone;
  args.options.window_left = 5;
  expect_error([&] { w.plan(args); }, "options.window_left");
  args.options.window_left = -1;
  args.levels.pop_back();
  expect_error([&] { w.plan(args); }, "levels.size()");
  Tensor qo2 = int32_tensor(std::vector<std::int32_t>{0, 2});
  args.levels = {{qo, {ip, ids, last}}, {qo2, {ip, ids, last}}};
  expect_error([&] { w.plan(args); }, "levels[1].qo_indptr[-1]");
  expect_error([] { MultiLevelCascadeAttention(0); }, "num_levels");
}

}  // namespace
}  // namespace kvinfer::testing
