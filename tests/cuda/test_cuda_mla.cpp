// SPDX-License-Identifier: Apache-2.0
// BatchMLAPagedAttention bound to a GPU: plan() takes host lengths and a device
// page table; no CUDA MLA kernel is compiled yet, so run() must say so clearly
// (the issue adding the kernel replaces this with the oracle comparison).
#include <gtest/gtest.h>

#include "cuda/gpu_test_util.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kDc = kMlaHeadDimCkv, kDp = kMlaHeadDimKpe;

TEST(CudaMLA, PlansOnTheGpuAndReportsTheMissingKernel) {
  KVINFER_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  const Tensor qo_indptr = int32_tensor(std::vector<std::int32_t>{0, 3, 5});
  const Tensor kv_indptr = int32_tensor(std::vector<std::int32_t>{0, 2, 3});
  const Tensor kv_len = int32_tensor(std::vector<std::int32_t>{20, 7});
  const Tensor ids_host = int32_tensor(std::vector<std::int32_t>{3, 0, 1});
  const Tensor ids = ids_host.to(gpu);
  const Tensor cache = Tensor::zeros({4, 16, kDc + kDp}, DType::kBF16, gpu);
  const Tensor q_nope = Tensor::zeros({5, 4, kDc}, DType::kBF16, gpu);
  const Tensor q_pe = Tensor::zeros({5, 4, kDp}, DType::kBF16, gpu);
  const Tensor out = Tensor::zeros({5, 4, kDc}, DType::kBF16, gpu);
  MLAPlanArgs args{.qo_indptr = qo_indptr,
                   .kv_indptr = kv_indptr,
                   .kv_indices = ids,
                   .kv_len = kv_len,
                   .num_heads = 4,
                   .page_size = 16,
                   .sm_scale = 0.1f};

  BatchMLAPagedAttention w(gpu);
  ASSERT_NO_THROW(w.plan(args));
  expect_error([&] { w.run(q_nope, q_pe, MLACache::combined(cache), out); }, "device", "no CUDA MLA kernel");

  // The page table must live where run() reads it.
  args.kv_indices = ids_host;
  expect_error([&] { w.plan(args); }, "kv_indices.device");
  // And the run's tensors on the wrapper's GPU.
  args.kv_indices = ids;
  w.plan(args);
  const Tensor q_host = Tensor::zeros({5, 4, kDc}, DType::kBF16);
  expect_error([&] { w.run(q_host, q_pe, MLACache::combined(cache), out); }, "q_nope.device");
}

}  // namespace
}  // namespace kvinfer::testing
