// SPDX-License-Identifier: Apache-2.0
// CUDA graphs and batch invariance of decode: a fixed-capacity plan captured once
// replays correctly after re-plans with other lengths and batch sizes, and with a
// fixed split size a request's output is bitwise independent of its neighbours.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gpu_test_util.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kHq = 32, kHk = 8, kD = 128, kPage = 16, kPages = 1024, kMaxBatch = 32;

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess)

std::vector<std::uint16_t> host_bits(const TensorView& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  copy(h, t);
  cudaDeviceSynchronize();
  std::vector<std::uint16_t> v(std::size_t(h.numel()));
  std::memcpy(v.data(), h.data(), h.nbytes());
  return v;
}

TEST(CudaDecodeGraph, CapturedRunReplaysAcrossReplans) {
  KVINFER_SKIP_WITHOUT_GPU();
  Rng rng(21);
  const Device gpu = Device::cuda(0);
  const Tensor cache = random_bf16({kPages, 2, kPage, kHk, kD}, rng).to(gpu);
  const PagedKVCache kv = PagedKVCache::combined(cache);
  // Buffers at capacity size whose addresses the graph captures.
  Tensor q_buf = Tensor::zeros({kMaxBatch, kHq, kD}, DType::kBF16, gpu);
  Tensor out_buf = Tensor::zeros({kMaxBatch, kHq, kD}, DType::kBF16, gpu);
  Tensor lse_buf = Tensor::zeros({kMaxBatch, kHq}, DType::kF32, gpu);
  Tensor indices_buf = Tensor::zeros({kPages}, DType::kI32, gpu);

  BatchDecodeWithPagedKVCache graphed(gpu, KVLayout::kNHD,
                                      Capacity{.max_batch = kMaxBatch, .max_qo_tokens = kMaxBatch, .max_kv = kPages});
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraphExec_t exec = nullptr;

  for (int trial = 0; trial < 5; ++trial) {
    // A new batch: sizes and lengths change, buffers stay.
    const int batch = trial == 0 ? kMaxBatch : 1 + int(rng() % kMaxBatch);
    std::vector<std::int32_t> kv_lens;
    for (int b = 0; b < batch; ++b) kv_lens.push_back(trial == 2 && b == 0 ? 9000 : int(rng() % 500));
    const HostPageTable t = random_page_table(kv_lens, kPage, 0, rng);
    ASSERT_LE(t.indices.numel(), kPages);
    copy(indices_buf.view().slice(0, 0, t.indices.numel()), t.indices);
    const Tensor q_host = random_bf16({batch, kHq, kD}, rng);
    copy(q_buf.view().slice(0, 0, batch), q_host);
    const PageTable table{t.indptr, indices_buf.view().slice(0, 0, std::max<std::int64_t>(1, t.indices.numel())),
                          t.last_page_len};
    const DecodePlanArgs args{.page_table = table, .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD,
                              .page_size = kPage};
    graphed.plan(args);
    if (exec == nullptr) {
      // Capture once, with the first (largest) batch's views.
      cudaGraph_t graph;
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      graphed.run(q_buf.view().slice(0, 0, batch), kv, out_buf.view().slice(0, 0, batch),
                  {.lse = lse_buf.view().slice(0, 0, batch), .stream = stream});
      CUDA_OK(cudaStreamEndCapture(stream, &graph));
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      CUDA_OK(cudaGraphDestroy(graph));
    }
    fill_bytes(out_buf, 0xFF);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));

    // Reference: a fresh wrapper planned the same way, run eagerly.
    BatchDecodeWithPagedKVCache fresh(gpu);
    fresh.plan(args);
    Tensor out_ref = Tensor::empty({batch, kHq, kD}, DType::kBF16, gpu);
    Tensor lse_ref = Tensor::empty({batch, kHq}, DType::kF32, gpu);
    fresh.run(q_buf.view().slice(0, 0, batch), kv, out_ref, {.lse = lse_ref});
    // Both schedules are made by the same planner; a capacity plan may split
    // differently only through its item budget, which is the same here.
    const auto a = host_bits(out_buf.view().slice(0, 0, batch)), b = host_bits(out_ref);
    ASSERT_EQ(a.size(), b.size());
    int mismatches = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const float x = bf16_to_f32(a[i]), y = bf16_to_f32(b[i]);
      if (!(std::abs(x - y) <= 1e-2f)) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0) << "trial " << trial << " batch " << batch;
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(CudaDecodeGraph, FixedSplitIsBatchInvariant) {
  KVINFER_SKIP_WITHOUT_GPU();
  Rng rng(22);
  const Device gpu = Device::cuda(0);
  const Tensor cache = random_bf16({kPages, 2, kPage, kHk, kD}, rng).to(gpu);
  const PagedKVCache kv = PagedKVCache::combined(cache);
  const std::vector<std::int32_t> kv_lens{2000, 3333, 77, 5000};
  const HostPageTable t = random_page_table(kv_lens, kPage, 0, rng);
  const Tensor indices = t.indices.to(gpu);
  const Tensor q = random_bf16({4, kHq, kD}, rng).to(gpu);
  Tensor out_all = Tensor::empty({4, kHq, kD}, DType::kBF16, gpu);
  BatchDecodeWithPagedKVCache w(gpu);
  w.plan({.page_table = {t.indptr, indices, t.last_page_len}, .num_qo_heads = kHq, .num_kv_heads = kHk,
          .head_dim = kD, .page_size = kPage, .split = {.fixed_split_size = 1024}});
  w.run(q, kv, out_all);
  const auto all = host_bits(out_all);
  // Request 1 alone: its pages are indices[indptr[1]:indptr[2]].
  const auto* ip = t.indptr.data_as<const std::int32_t>();
  std::vector<std::int32_t> one_indptr{0, ip[2] - ip[1]}, one_last{t.last_page_len.data_as<const std::int32_t>()[1]};
  const Tensor oi = int32_tensor(one_indptr), ol = int32_tensor(one_last);
  Tensor out_one = Tensor::empty({1, kHq, kD}, DType::kBF16, gpu);
  w.plan({.page_table = {oi, indices.view().slice(0, ip[1], ip[2]), ol}, .num_qo_heads = kHq, .num_kv_heads = kHk,
          .head_dim = kD, .page_size = kPage, .split = {.fixed_split_size = 1024}});
  w.run(q.view().slice(0, 1, 2), kv, out_one);
  const auto one = host_bits(out_one);
  const std::vector<std::uint16_t> mine(all.begin() + kHq * kD, all.begin() + 2 * kHq * kD);
  EXPECT_EQ(one, mine);
}

}  // namespace
}  // namespace kvinfer::testing
