// SPDX-License-Identifier: Apache-2.0
// CUDA graphs and batch invariance of decode: a fixed-capacity plan captured once
// replays correctly after re-plans with other lengths and batch sizes, and with a
// fixed split size a request's output is bitwise independent of its neighbours.
// The same graph mode for the ragged and paged prefill wrappers (causal, several
// query rows per request), each replay checked against the float64 oracle.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gpu_test_util.hpp"
#include "oracle/oracle.hpp"
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
    // Captured once, with the first (largest) batch's views.
    ASSERT_TRUE(run_in_graph(
        exec, stream,
        [&] {
          graphed.run(q_buf.view().slice(0, 0, batch), kv, out_buf.view().slice(0, 0, batch),
                      {.lse = lse_buf.view().slice(0, 0, batch), .stream = stream});
        },
        [&] { fill_bytes(out_buf, 0xFF); }));

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

// With a fixed split size, each request of `alone` gets the same bits planned alone
// as in the batch, whose longest request sets the merge kernel and its warps: the
// merge of fixed-split plans sums every row's chunks in one order whatever the launch
// (merge_partials.cu).
void check_fixed_split_invariance(std::int64_t hq, std::int64_t hk, const std::vector<std::int32_t>& kv_lens,
                                  const std::vector<int>& alone, std::int64_t split) {
  Rng rng(22);
  const Device gpu = Device::cuda(0);
  const HostPageTable t = random_page_table(kv_lens, kPage, 0, rng);
  const Tensor cache = random_bf16({t.num_pages, 2, kPage, hk, kD}, rng).to(gpu);
  const PagedKVCache kv = PagedKVCache::combined(cache);
  const Tensor indices = t.indices.to(gpu);
  const auto batch = std::int64_t(kv_lens.size());
  const Tensor q = random_bf16({batch, hq, kD}, rng).to(gpu);
  Tensor out_all = Tensor::empty({batch, hq, kD}, DType::kBF16, gpu);
  BatchDecodeWithPagedKVCache w(gpu);
  w.plan({.page_table = {t.indptr, indices, t.last_page_len}, .num_qo_heads = hq, .num_kv_heads = hk,
          .head_dim = kD, .page_size = kPage, .split = {.fixed_split_size = split}});
  w.run(q, kv, out_all);
  const auto all = host_bits(out_all);
  const auto* ip = t.indptr.data_as<const std::int32_t>();
  for (int b : alone) {
    // Request b alone: its pages are indices[indptr[b]:indptr[b + 1]].
    std::vector<std::int32_t> one_indptr{0, ip[b + 1] - ip[b]}, one_last{t.last_page_len.data_as<const std::int32_t>()[b]};
    const Tensor oi = int32_tensor(one_indptr), ol = int32_tensor(one_last);
    Tensor out_one = Tensor::empty({1, hq, kD}, DType::kBF16, gpu);
    w.plan({.page_table = {oi, indices.view().slice(0, ip[b], ip[b + 1]), ol}, .num_qo_heads = hq,
            .num_kv_heads = hk, .head_dim = kD, .page_size = kPage, .split = {.fixed_split_size = split}});
    w.run(q.view().slice(0, b, b + 1), kv, out_one);
    const auto one = host_bits(out_one);
    const std::vector<std::uint16_t> mine(all.begin() + b * hq * kD, all.begin() + (b + 1) * hq * kD);
    EXPECT_EQ(one, mine) << "request " << b << " (" << kv_lens[std::size_t(b)] << " keys)";
    EXPECT_TRUE(std::any_of(one.begin(), one.end(), [](std::uint16_t x) { return (x & 0x7fffu) != 0; }))
        << "request " << b << ": all zeros";
  }
}

// 1024-key chunks: 2, 4, 1, 5, 12 and 40 chunks, on the decode tile (GQA group 4):
// alone, request 1 is merged by a warp per row and requests 3 and 4 by CTAs of 4 warps;
// in the batch all three by CTAs of 16.
TEST(CudaDecodeGraph, FixedSplitIsBatchInvariant) {
  KVINFER_SKIP_WITHOUT_GPU();
  check_fixed_split_invariance(8, 2, {2000, 3333, 77, 5000, 12000, 40000}, {1, 3, 4}, 1024);
}

// The same on the CUDA-core decode kernel (GQA group 1).
TEST(CudaDecodeGraph, FixedSplitIsBatchInvariantOnCudaCores) {
  KVINFER_SKIP_WITHOUT_GPU();
  check_fixed_split_invariance(2, 2, {2000, 3333, 77, 5000, 12000, 40000}, {0, 1, 3, 4}, 1024);
}

// ---------------------------------------------------------------- prefill
// Ragged and paged prefill with a fixed capacity: run() captured once (it must
// neither fail nor break the capture: no host sync, no allocation), then re-planned
// with other batch sizes and lengths (query rows > 1, causal, rows that see no key,
// empty requests) and replayed. Each replay equals an eager run() of the same plan
// bitwise, and is within the tolerance model of the float64 oracle, with the CPU
// backend on the same inputs as the fp32 reference.

constexpr std::int64_t kPfHq = 16, kPfHk = 4, kPfBatch = 8, kPfQoTokens = 256;
constexpr std::int64_t kPfKvTokens = 2048;  // ragged capacity (key rows)
constexpr std::int64_t kPfPages = 160;      // paged capacity (pages of kPage tokens)

enum class PrefillKind { kRagged, kPaged };

struct PrefillBatch {
  std::vector<std::int32_t> qo_lens, kv_lens;
};

// Trial 0 fills the capacity (the graph is captured with it); then one long request
// (split KV), the edge cases, and random batches. Lengths keep within both
// capacities: sum kv <= kPfKvTokens tokens, hence <= kPfKvTokens / kPage + kPfBatch
// pages.
PrefillBatch prefill_batch(int trial, Rng& rng) {
  switch (trial) {
    case 0:
      return {{64, 48, 40, 32, 24, 20, 16, 12}, {300, 48, 400, 97, 150, 20, 600, 433}};
    case 1:
      return {{128}, {1500}};
    case 2:
      // qo > kv (the first 30 rows see no key), kv 0, qo 0, one row, a plain one.
      return {{40, 5, 0, 1, 77}, {10, 0, 50, 333, 200}};
    default: {
      PrefillBatch b;
      const int batch = 1 + int(rng() % kPfBatch);
      std::int64_t qo_left = kPfQoTokens, kv_left = kPfKvTokens;
      for (int r = 0; r < batch; ++r) {
        const auto qo = std::int32_t(std::min<std::int64_t>(qo_left, 1 + std::int64_t(rng() % 64)));
        const auto kv = std::int32_t(std::min<std::int64_t>(kv_left, qo + std::int64_t(rng() % 250)));
        b.qo_lens.push_back(qo);
        b.kv_lens.push_back(kv);
        qo_left -= qo;
        kv_left -= kv;
      }
      return b;
    }
  }
}

std::vector<std::int32_t> indptr_of(const std::vector<std::int32_t>& lens) {
  std::vector<std::int32_t> indptr{0};
  for (std::int32_t n : lens) indptr.push_back(indptr.back() + n);
  return indptr;
}

Tensor on_host(const TensorView& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  copy(h, t);
  return h;
}

double bf16_at(const Tensor& t, std::int64_t i) {
  return double(bf16_to_f32(t.data_as<const std::uint16_t>()[i]));
}

// Errors of the GPU result and of the CPU backend against the oracle over all rows,
// plus the exact conditions: no NaN, -inf LSE exactly where the oracle has it, and
// a zero output row there.
struct PrefillErrors {
  double gpu_o = 0, gpu_lse = 0, cpu_o = 0, cpu_lse = 0;
  int nan = 0, inf_mismatch = 0;
};

void check_prefill_graph(PrefillKind kind, const AttentionOptions& options = {.mask_mode = MaskMode::kCausal}) {
  const bool ragged = kind == PrefillKind::kRagged;
  Rng rng(ragged ? 31 : 32);
  const Device gpu = Device::cuda(0);
  const Capacity capacity{
      .max_batch = kPfBatch, .max_qo_tokens = kPfQoTokens, .max_kv = ragged ? kPfKvTokens : kPfPages};
  // Buffers at capacity size whose addresses the graph captures; each trial writes
  // its inputs into their leading rows.
  Tensor q_buf = Tensor::zeros({kPfQoTokens, kPfHq, kD}, DType::kBF16, gpu);
  Tensor out_buf = Tensor::zeros({kPfQoTokens, kPfHq, kD}, DType::kBF16, gpu);
  Tensor lse_buf = Tensor::zeros({kPfQoTokens, kPfHq}, DType::kF32, gpu);
  Tensor out_eager = Tensor::zeros({kPfQoTokens, kPfHq, kD}, DType::kBF16, gpu);
  Tensor lse_eager = Tensor::zeros({kPfQoTokens, kPfHq}, DType::kF32, gpu);
  Tensor k_buf, v_buf, indices_buf, cache_host, cache;
  if (ragged) {
    k_buf = Tensor::zeros({kPfKvTokens, kPfHk, kD}, DType::kBF16, gpu);
    v_buf = Tensor::zeros({kPfKvTokens, kPfHk, kD}, DType::kBF16, gpu);
  } else {
    cache_host = random_bf16({kPfPages, 2, kPage, kPfHk, kD}, rng);
    cache = cache_host.to(gpu);
    indices_buf = Tensor::zeros({kPfPages}, DType::kI32, gpu);
  }
  const PagedKVCache kv_dev = ragged ? PagedKVCache() : PagedKVCache::combined(cache);

  BatchPrefillWithRaggedKVCache ragged_w(gpu, KVLayout::kNHD, capacity);
  BatchPrefillWithPagedKVCache paged_w(gpu, KVLayout::kNHD, capacity);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraphExec_t exec = nullptr;

  for (int trial = 0; trial < 6; ++trial) {
    const PrefillBatch pb = prefill_batch(trial, rng);
    const auto batch = std::int64_t(pb.qo_lens.size());
    const std::vector<std::int32_t> qo_indptr = indptr_of(pb.qo_lens), kv_indptr = indptr_of(pb.kv_lens);
    const std::int64_t nnz_q = qo_indptr.back(), nnz_kv = kv_indptr.back();
    ASSERT_LE(nnz_q, kPfQoTokens);
    ASSERT_LE(nnz_kv, kPfKvTokens);
    const Tensor qo_indptr_t = int32_tensor(qo_indptr), kv_indptr_t = int32_tensor(kv_indptr);

    const Tensor q_host = random_bf16({nnz_q, kPfHq, kD}, rng);
    if (nnz_q > 0) copy(q_buf.view().slice(0, 0, nnz_q), q_host);
    Tensor k_host, v_host;
    HostPageTable table;
    if (ragged) {
      k_host = random_bf16({nnz_kv, kPfHk, kD}, rng);
      v_host = random_bf16({nnz_kv, kPfHk, kD}, rng);
      if (nnz_kv > 0) {
        copy(k_buf.view().slice(0, 0, nnz_kv), k_host);
        copy(v_buf.view().slice(0, 0, nnz_kv), v_host);
      }
    } else {
      std::int64_t used = 0;
      for (std::int32_t n : pb.kv_lens) used += (n + kPage - 1) / kPage;
      ASSERT_LE(used, kPfPages);
      table = random_page_table(pb.kv_lens, kPage, kPfPages - used, rng);  // ids anywhere in the cache
      if (used > 0) copy(indices_buf.view().slice(0, 0, used), table.indices);
    }
    // The plan arguments of this batch, for the graphed wrappers and the CPU's.
    const RaggedPrefillPlanArgs ragged_args{.qo_indptr = qo_indptr_t, .kv_indptr = kv_indptr_t,
                                            .num_qo_heads = kPfHq, .num_kv_heads = kPfHk, .head_dim_qk = kD,
                                            .options = options};
    const auto paged_args = [&](const PageTable& t) {
      return PagedPrefillPlanArgs{.qo_indptr = qo_indptr_t, .page_table = t, .num_qo_heads = kPfHq,
                                  .num_kv_heads = kPfHk, .head_dim = kD, .page_size = kPage, .options = options};
    };
    // The plan reads the whole indices buffer's address; run() reads the ids there.
    if (ragged) {
      ragged_w.plan(ragged_args);
    } else {
      paged_w.plan(paged_args({table.indptr, indices_buf, table.last_page_len}));
    }
    // run() on views of this plan's sizes over the fixed buffers.
    auto run = [&](Tensor& out, Tensor& lse, cudaStream_t s) {
      const RunOptions ro{.lse = lse.view().slice(0, 0, nnz_q), .stream = s};
      const TensorView q = q_buf.view().slice(0, 0, nnz_q), o = out.view().slice(0, 0, nnz_q);
      if (ragged) {
        ragged_w.run(q, k_buf.view().slice(0, 0, nnz_kv), v_buf.view().slice(0, 0, nnz_kv), o, ro);
      } else {
        paged_w.run(q, kv_dev, o, ro);
      }
    };
    if (exec == nullptr) {
      // Capture once, with the first batch (the capacity's), and end the capture
      // whatever run() did, so that a failure is reported here.
      cudaGraph_t graph = nullptr;
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      EXPECT_NO_THROW(run(out_buf, lse_buf, stream)) << "run() inside stream capture";
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
      EXPECT_EQ(status, cudaStreamCaptureStatusActive)
          << "run() invalidated the capture (host sync or allocation)";
      const cudaError_t end = cudaStreamEndCapture(stream, &graph);
      ASSERT_EQ(end, cudaSuccess) << cudaGetErrorString(end);
      ASSERT_NE(graph, nullptr);
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      CUDA_OK(cudaGraphDestroy(graph));
    }
    fill_bytes(out_buf, kPoison);
    fill_bytes(lse_buf, kPoison);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    // The same plan run eagerly: the replay must repeat it bitwise.
    fill_bytes(out_eager, kPoison);
    fill_bytes(lse_eager, kPoison);
    run(out_eager, lse_eager, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    const Tensor o_gpu = on_host(out_buf.view().slice(0, 0, nnz_q)),
                 lse_gpu = on_host(lse_buf.view().slice(0, 0, nnz_q));
    const Tensor o_eager = on_host(out_eager.view().slice(0, 0, nnz_q)),
                 lse_eager_h = on_host(lse_eager.view().slice(0, 0, nnz_q));
    EXPECT_EQ(std::memcmp(o_gpu.data(), o_eager.data(), o_gpu.nbytes()), 0) << "trial " << trial;
    EXPECT_EQ(std::memcmp(lse_gpu.data(), lse_eager_h.data(), lse_gpu.nbytes()), 0) << "trial " << trial;

    // The CPU backend on the same inputs (the fp32 reference of the tolerance model).
    Tensor o_cpu = Tensor::empty({nnz_q, kPfHq, kD}, DType::kBF16),
           lse_cpu = Tensor::empty({nnz_q, kPfHq}, DType::kF32);
    if (ragged) {
      BatchPrefillWithRaggedKVCache w;
      w.plan(ragged_args);
      w.run(q_host, k_host, v_host, o_cpu, {.lse = lse_cpu});
    } else {
      BatchPrefillWithPagedKVCache w;
      w.plan(paged_args(table.view()));
      w.run(q_host, PagedKVCache::combined(cache_host), o_cpu, {.lse = lse_cpu});
    }

    // The float64 oracle, request by request.
    PrefillErrors e;
    const auto* ids = ragged ? nullptr : table.indices.data_as<const std::int32_t>();
    const auto* pages = ragged ? nullptr : table.indptr.data_as<const std::int32_t>();
    for (std::int64_t r = 0; r < batch; ++r) {
      const std::int64_t qo = pb.qo_lens[r], kv = pb.kv_lens[r];
      std::vector<double> q, k, v;
      for (std::int64_t i = qo_indptr[r] * kPfHq * kD; i < qo_indptr[r + 1] * kPfHq * kD; ++i)
        q.push_back(bf16_at(q_host, i));
      for (std::int64_t j = 0; j < kv; ++j) {
        for (std::int64_t h = 0; h < kPfHk; ++h) {
          for (std::int64_t d = 0; d < kD; ++d) {
            if (ragged) {
              const std::int64_t at = ((kv_indptr[r] + j) * kPfHk + h) * kD + d;
              k.push_back(bf16_at(k_host, at));
              v.push_back(bf16_at(v_host, at));
            } else {
              const std::int64_t page = ids[pages[r] + j / kPage], slot = j % kPage;
              const std::int64_t at_k = (((page * 2 + 0) * kPage + slot) * kPfHk + h) * kD + d;
              const std::int64_t at_v = (((page * 2 + 1) * kPage + slot) * kPfHk + h) * kD + d;
              k.push_back(bf16_at(cache_host, at_k));
              v.push_back(bf16_at(cache_host, at_v));
            }
          }
        }
      }
      const oracle::AttentionResult ref =
          oracle::attention(oracle::spec_from_options(options, qo, kv, kPfHq, kPfHk, kD, kD), q, k, v);
      for (std::int64_t i = 0; i < qo; ++i) {
        for (std::int64_t h = 0; h < kPfHq; ++h) {
          const std::int64_t row = (qo_indptr[r] + i) * kPfHq + h;
          const double ref_lse = ref.lse[std::size_t(i * kPfHq + h)];
          const double g_lse = lse_gpu.data_as<const float>()[row],
                       c_lse = lse_cpu.data_as<const float>()[row];
          bool nonzero = false;
          for (std::int64_t d = 0; d < kD; ++d) {
            const double want = ref.o[std::size_t((i * kPfHq + h) * kD + d)];
            const double g = bf16_at(o_gpu, row * kD + d), c = bf16_at(o_cpu, row * kD + d);
            if (std::isnan(g)) ++e.nan;
            nonzero |= g != 0.0;
            e.gpu_o = std::max(e.gpu_o, std::abs(g - want));
            e.cpu_o = std::max(e.cpu_o, std::abs(c - want));
          }
          if (std::isnan(g_lse)) ++e.nan;
          const double neg_inf = -std::numeric_limits<double>::infinity();
          if ((g_lse == neg_inf) != (ref_lse == neg_inf) || (ref_lse == neg_inf && nonzero)) {
            ++e.inf_mismatch;
          } else if (ref_lse != neg_inf) {
            e.gpu_lse = std::max(e.gpu_lse, std::abs(g_lse - ref_lse));
            e.cpu_lse = std::max(e.cpu_lse, std::abs(c_lse - ref_lse));
          }
        }
      }
    }
    const double atol = attention_atol(DType::kBF16, DType::kBF16, DType::kBF16);
    SCOPED_TRACE(::testing::Message() << (ragged ? "ragged" : "paged") << " trial " << trial << " batch "
                                      << batch << " nnz_q " << nnz_q << " nnz_kv " << nnz_kv);
    EXPECT_EQ(e.nan, 0);
    EXPECT_EQ(e.inf_mismatch, 0) << "rows that see no key: LSE -inf and a zero output, and only those";
    EXPECT_LE(e.gpu_o, 2 * e.cpu_o + atol) << "cpu error " << e.cpu_o;
    EXPECT_LE(e.gpu_lse, 2 * e.cpu_lse + atol) << "cpu error " << e.cpu_lse;
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(CudaPrefillGraph, RaggedCapturedRunReplaysAcrossReplans) {
  KVINFER_SKIP_WITHOUT_GPU();
  check_prefill_graph(PrefillKind::kRagged);
}

TEST(CudaPrefillGraph, PagedCapturedRunReplaysAcrossReplans) {
  KVINFER_SKIP_WITHOUT_GPU();
  check_prefill_graph(PrefillKind::kPaged);
}

// ALiBi: the slopes live in a device buffer of the plan, which re-plans must keep
// at the address the graph captured.
TEST(CudaPrefillGraph, AlibiSlopesKeepTheirAddressAcrossReplans) {
  KVINFER_SKIP_WITHOUT_GPU();
  check_prefill_graph(PrefillKind::kRagged, {.mask_mode = MaskMode::kCausal, .pos_encoding = PosEncoding::kAlibi});
}

}  // namespace
}  // namespace kvinfer::testing
