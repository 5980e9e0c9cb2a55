// SPDX-License-Identifier: Apache-2.0
// MultiLevelCascadeAttention on the GPU: levels over one page pool, merged in
// place, equal to attention over each request's concatenated KV (float64 oracle);
// decode and append (causal on the last level), 2 and 3 levels, shared and unshared
// prefixes, empty segments, soft cap, fixed-capacity re-plans, runs captured in a
// CUDA graph (the last level forks onto a side stream and joins again).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "testing/cascade_case.hpp"

namespace kvinfer::testing {
namespace {

const Device kGpu = Device::cuda(0);

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess)

TEST(CudaCascade, TwoLevelsSharedPrefixDecode) {
  KVINFER_SKIP_WITHOUT_GPU();
  run_cascade_case({{{0}, {300}}, {{0, 1, 2, 3, 4, 5}, {17, 1, 40, 0, 33, 64}}}, {1, 1, 1, 1, 1, 1}, {}, 1, nullptr, kGpu);
}

TEST(CudaCascade, TwoLevelsSharedPrefixAppendCausal) {
  KVINFER_SKIP_WITHOUT_GPU();
  run_cascade_case({{{0}, {257}}, {{0, 1, 2}, {37, 20, 5}}}, {37, 3, 5}, {.mask_mode = MaskMode::kCausal}, 2, nullptr,
                   kGpu);
}

TEST(CudaCascade, ThreeLevelsTwoGroupsSoftCap) {
  KVINFER_SKIP_WITHOUT_GPU();
  run_cascade_case({{{0}, {100}}, {{0, 2}, {45, 70}}, {{0, 1, 2, 3}, {9, 4, 31, 16}}}, {2, 4, 1, 3},
                   {.mask_mode = MaskMode::kCausal, .logits_soft_cap = 20.0f}, 3, nullptr, kGpu);
}

TEST(CudaCascade, UnsharedPrefixesAndEmptySegments) {
  KVINFER_SKIP_WITHOUT_GPU();
  run_cascade_case({{{0, 1, 2}, {64, 0, 19}}, {{0, 1, 2}, {8, 0, 1}}}, {1, 1, 1}, {}, 4, nullptr, kGpu);
}

TEST(CudaCascade, FixedCapacityReplans) {
  KVINFER_SKIP_WITHOUT_GPU();
  MultiLevelCascadeAttention w(2, kGpu, KVLayout::kNHD,
                               {Capacity{.max_batch = 4, .max_qo_tokens = 64, .max_kv = 64},
                                Capacity{.max_batch = 16, .max_qo_tokens = 64, .max_kv = 256}});
  run_cascade_case({{{0}, {300}}, {{0, 1, 2, 3, 4, 5}, {17, 1, 40, 0, 33, 64}}}, {1, 1, 1, 1, 1, 1}, {}, 5, &w, kGpu);
  run_cascade_case({{{0, 2}, {64, 200}}, {{0, 1, 2, 3}, {5, 9, 31, 16}}}, {2, 4, 1, 3},
                   {.mask_mode = MaskMode::kCausal}, 6, &w, kGpu);
  run_cascade_case({{{0}, {10}}, {{0}, {20}}}, {1}, {}, 7, &w, kGpu);
}

// Captures run on a fresh stream into a CUDA graph and launches the graph: the side
// stream of the last level must join the capture and join back before its end.
void run_captured(const std::function<void(Stream)>& run) {
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraphExec_t exec = nullptr;
  ASSERT_TRUE(capture_graph(exec, stream, [&] { run(stream); }));
  ASSERT_TRUE(replay_graph(exec, stream));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(CudaCascade, TwoLevelsCapturedInGraph) {
  KVINFER_SKIP_WITHOUT_GPU();
  run_cascade_case({{{0}, {300}}, {{0, 1, 2, 3, 4, 5}, {17, 1, 40, 0, 33, 64}}}, {1, 1, 1, 1, 1, 1}, {}, 8, nullptr,
                   kGpu, run_captured);
}

TEST(CudaCascade, ThreeLevelsCapturedInGraph) {
  KVINFER_SKIP_WITHOUT_GPU();
  run_cascade_case({{{0}, {100}}, {{0, 2}, {45, 70}}, {{0, 1, 2, 3}, {9, 4, 31, 16}}}, {2, 4, 1, 3},
                   {.mask_mode = MaskMode::kCausal}, 9, nullptr, kGpu, run_captured);
}

}  // namespace
}  // namespace kvinfer::testing
