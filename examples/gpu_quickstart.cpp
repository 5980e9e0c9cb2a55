// SPDX-License-Identifier: Apache-2.0
// The GPU path of the public API: device tensors, a stream, and a paged decode run
// captured once in a CUDA graph with a fixed Capacity and replayed after a re-plan with
// another batch. Each replay is checked against the CPU backend on the same inputs.
// Built with the CUDA backend only; exits 77 (a skipped test) without a CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kvinfer/kvinfer.hpp"

using namespace kvinfer;

namespace {

constexpr int kSkipped = 77;
constexpr std::int64_t kHq = 32, kHk = 8, kD = 128, kPage = 16;
// What the captured graph is sized for: any batch within it replays the same graph.
constexpr std::int64_t kMaxBatch = 16, kPages = 256;

#define CUDA_CHECK(call)                                                                        \
  do {                                                                                          \
    const cudaError_t err_ = (call);                                                            \
    if (err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "gpu quickstart: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)

// Deterministic values in [-1, 1), stored as bfloat16.
struct Lcg {
  std::uint64_t state;
  float next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return float(std::int64_t(state >> 40) % 2048 - 1024) / 1024.0f;
  }
};
Tensor random_bf16(Shape shape, Lcg& rng) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  auto* p = t.data_as<std::uint16_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = f32_to_bf16(rng.next());
  return t;
}

// A host page table for requests of `kv_lens` tokens, pages dealt out in a scattered order.
struct HostTable {
  std::vector<std::int32_t> indptr{0}, indices, last_page_len;
};
HostTable make_table(const std::vector<std::int32_t>& kv_lens) {
  HostTable t;
  std::int32_t next = 0;
  for (const std::int32_t len : kv_lens) {
    const std::int32_t pages = (len + std::int32_t(kPage) - 1) / std::int32_t(kPage);
    for (std::int32_t p = 0; p < pages; ++p, ++next) t.indices.push_back((next * 37) % std::int32_t(kPages));
    t.indptr.push_back(t.indptr.back() + pages);
    t.last_page_len.push_back(pages == 0 ? 0 : len - (pages - 1) * std::int32_t(kPage));
  }
  return t;
}

// Largest |a - b| over two bf16 or f32 host tensors of the same shape.
double max_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x =
        a.dtype() == DType::kF32 ? a.data_as<float>()[i] : bf16_to_f32(a.data_as<std::uint16_t>()[i]);
    const double y =
        b.dtype() == DType::kF32 ? b.data_as<float>()[i] : bf16_to_f32(b.data_as<std::uint16_t>()[i]);
    if (std::isinf(x) && std::isinf(y) && (x > 0) == (y > 0)) continue;  // empty requests: LSE -inf
    m = std::max(m, std::isnan(x) || std::isnan(y) ? INFINITY : std::abs(x - y));
  }
  return m;
}

}  // namespace

int run_example() {
  const Device gpu = Device::cuda(0);
  Lcg rng{42};

  // The page pool, on the GPU: [pages, 2 (K, V), page_size, Hk, D], NHD.
  const Tensor cache_host = random_bf16({kPages, 2, kPage, kHk, kD}, rng);
  const Tensor cache = cache_host.to(gpu);
  const PagedKVCache kv = PagedKVCache::combined(cache);

  // Device buffers of capacity size: the graph records their addresses, so every
  // replay reads and writes these same buffers, through views of the current batch.
  Tensor q_buf = Tensor::zeros({kMaxBatch, kHq, kD}, DType::kBF16, gpu);
  Tensor out_buf = Tensor::zeros({kMaxBatch, kHq, kD}, DType::kBF16, gpu);
  Tensor lse_buf = Tensor::zeros({kMaxBatch, kHq}, DType::kF32, gpu);
  Tensor indices_buf = Tensor::zeros({kPages}, DType::kI32, gpu);

  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  BatchDecodeWithPagedKVCache decode(
      gpu, KVLayout::kNHD, Capacity{.max_batch = kMaxBatch, .max_qo_tokens = kMaxBatch, .max_kv = kPages});
  cudaGraphExec_t graph_exec = nullptr;

  // The first batch fills the capacity (the graph is captured with its views); the
  // second is smaller, with other lengths and an empty request, and replays the graph.
  const std::vector<std::vector<std::int32_t>> batches = {
      {1000, 17, 300, 64, 1, 250, 129, 16, 900, 33, 48, 512, 7, 96, 160, 200}, {2048, 0, 95, 311, 5}};
  for (const auto& kv_lens : batches) {
    const auto batch = std::int64_t(kv_lens.size());
    const HostTable t = make_table(kv_lens);
    const auto n_idx = std::int64_t(t.indices.size());
    const Tensor q_host = random_bf16({batch, kHq, kD}, rng);

    // New inputs into the captured buffers, on the stream the graph runs on.
    copy(q_buf.view().slice(0, 0, batch), q_host, stream);
    copy(indices_buf.view().slice(0, 0, n_idx),
         TensorView(const_cast<std::int32_t*>(t.indices.data()), DType::kI32, {n_idx}), stream);

    // plan() reads the lengths on the host; run() reads the page ids on the device.
    const TensorView indptr(const_cast<std::int32_t*>(t.indptr.data()), DType::kI32, {batch + 1});
    const TensorView last(const_cast<std::int32_t*>(t.last_page_len.data()), DType::kI32, {batch});
    const DecodePlanArgs args{
        .page_table = {indptr, indices_buf.view().slice(0, 0, std::max<std::int64_t>(1, n_idx)), last},
        .num_qo_heads = kHq,
        .num_kv_heads = kHk,
        .head_dim = kD,
        .page_size = kPage};
    decode.plan(args);

    if (graph_exec == nullptr) {
      // run() launches without synchronising or allocating, so it can be captured.
      cudaGraph_t graph = nullptr;
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      decode.run(q_buf.view().slice(0, 0, batch), kv, out_buf.view().slice(0, 0, batch),
                 {.lse = lse_buf.view().slice(0, 0, batch), .stream = stream});
      CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      CUDA_CHECK(cudaGraphInstantiate(&graph_exec, graph, 0));
      CUDA_CHECK(cudaGraphDestroy(graph));
    }
    CUDA_CHECK(cudaGraphLaunch(graph_exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    // The results back on the host (views of the first `batch` rows of the buffers).
    Tensor out_gpu = Tensor::empty({batch, kHq, kD}, DType::kBF16);
    Tensor lse_gpu = Tensor::empty({batch, kHq}, DType::kF32);
    copy(out_gpu, out_buf.view().slice(0, 0, batch), stream);
    copy(lse_gpu, lse_buf.view().slice(0, 0, batch), stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));

    // The same batch on the CPU backend, from the host copies of every input.
    BatchDecodeWithPagedKVCache reference(Device::cpu());
    const TensorView indices_host(const_cast<std::int32_t*>(t.indices.data()), DType::kI32, {n_idx});
    reference.plan({.page_table = {indptr, indices_host, last},
                    .num_qo_heads = kHq,
                    .num_kv_heads = kHk,
                    .head_dim = kD,
                    .page_size = kPage});
    Tensor out_cpu = Tensor::empty({batch, kHq, kD}, DType::kBF16);
    Tensor lse_cpu = Tensor::empty({batch, kHq}, DType::kF32);
    reference.run(q_host, PagedKVCache::combined(cache_host), out_cpu, {.lse = lse_cpu});

    // bf16 outputs of two summation orders: a few units in the last place apart.
    const double d_out = max_diff(out_gpu, out_cpu), d_lse = max_diff(lse_gpu, lse_cpu);
    std::printf(
        "gpu quickstart: batch of %lld requests (%lld pages): max |gpu - cpu| %.2g in o, %.2g in lse\n",
        static_cast<long long>(batch), static_cast<long long>(n_idx), d_out, d_lse);
    if (!(d_out <= 2e-2) || !(d_lse <= 1e-3)) {
      std::printf("gpu quickstart: FAILED: the graph replay differs from the CPU backend\n");
      return 1;
    }
  }
  CUDA_CHECK(cudaGraphExecDestroy(graph_exec));
  CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("gpu quickstart: CUDA graph replay matches the CPU backend (%zu batches)\n", batches.size());
  return 0;
}

int main() {
  if (!cuda_backend_built() || cuda_device_count() == 0) {
    std::printf("gpu quickstart: skipped (no CUDA device)\n");
    return kSkipped;
  }
  try {
    return run_example();
  } catch (const Error& e) {
    std::printf("gpu quickstart: FAILED: %s\n", e.what());
    return 1;
  }
}
