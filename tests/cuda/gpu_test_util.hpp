// SPDX-License-Identifier: Apache-2.0
// Helpers of the GPU tests: skipping without a device, mirroring host tensors (and
// strided views into them) on cuda:0, poisoning outputs, comparing results,
// capturing and replaying CUDA graphs.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#include "testing/attention_case.hpp"

// Every GPU test starts with this: without a device it is reported as skipped, and
// scripts/gpu-check.sh counts how many actually ran.
#define KVINFER_SKIP_WITHOUT_GPU()                                             \
  do {                                                                         \
    if (::kvinfer::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

namespace kvinfer {
// Parameter listings show dtype names rather than bytes.
inline void PrintTo(DType t, std::ostream* os) {
  *os << dtype_name(t);
}
}  // namespace kvinfer

namespace kvinfer::testing {

inline constexpr std::uint8_t kPoison = 0xFF;

// fp16 with bf16 (q and KV of different 16-bit types) and head dims other than
// 64/128/256/512 (and 192 / 128) have CUDA kernels in the `full` instance preset only
// (cmake/KvinferInstances.cmake).
inline bool needs_full_preset(const AttentionCase& c) {
  const bool exact = c.head_dim_qk == c.head_dim_vo
                         ? (c.head_dim_qk == 64 || c.head_dim_qk == 128 || c.head_dim_qk == 256 || c.head_dim_qk == 512)
                         : c.head_dim_qk == 192 && c.head_dim_vo == 128;
  return (!is_fp8(c.kv_dtype) && c.kv_dtype != c.q_dtype) || !exact;
}
#define KVINFER_SKIP_WITHOUT_INSTANCES(c)                                                                  \
  do {                                                                                                     \
    if (::kvinfer::testing::needs_full_preset(c) && ::kvinfer::instance_preset() != "full")                \
      GTEST_SKIP() << "the 'full' instance preset's (this build: " << ::kvinfer::instance_preset()             \
                   << ")";                                                                                 \
  } while (0)

// A host storage tensor and a copy of it on cuda:0.
struct Mirror {
  Tensor host;
  Tensor dev;

  explicit Mirror(Tensor h) : host(std::move(h)), dev(host.to(Device::cuda(0))) {}

  // The view of dev with the element offset, shape and strides that `v` has in host.
  TensorView on_dev(const TensorView& v) const {
    const std::ptrdiff_t offset = static_cast<const char*>(v.data()) - static_cast<const char*>(host.data());
    return TensorView(static_cast<char*>(dev.data()) + offset, v.dtype(), v.shape(), v.strides(),
                      Device::cuda(0));
  }
  // Both copies filled with kPoison bytes (NaN for every float type).
  void poison() {
    fill_bytes(host, kPoison);
    fill_bytes(dev, kPoison);
  }
  Tensor download() const { return dev.to(Device::cpu()); }
  // Byte-exact equality of the two storages (after the same op ran on each).
  ::testing::AssertionResult same_bytes() const {
    const Tensor d = download();
    const auto* a = static_cast<const std::uint8_t*>(host.data());
    const auto* b = static_cast<const std::uint8_t*>(d.data());
    for (std::size_t i = 0; i < host.nbytes(); ++i) {
      if (a[i] != b[i]) {
        return ::testing::AssertionFailure() << "first difference at byte " << i << " of " << host.nbytes()
                                             << ": cpu " << int(a[i]) << ", gpu " << int(b[i]);
      }
    }
    return ::testing::AssertionSuccess();
  }
};

// The bytes of a view (on any device), copied to the host.
inline std::vector<std::uint8_t> host_bytes(const TensorView& t) {
  const Tensor h = Tensor::empty(t.shape(), t.dtype());
  copy(h, t);
  std::vector<std::uint8_t> v(h.nbytes());
  std::memcpy(v.data(), h.data(), h.nbytes());
  return v;
}

inline float element_as_float(const void* p, DType t) {
  switch (t) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kF16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return f16_to_f32(b);
    }
    case DType::kBF16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16_to_f32(b);
    }
    default:
      return NAN;
  }
}

// Element-wise closeness of two float storages of the same dtype: |gpu - cpu| <=
// atol + rtol |cpu|; NaN must be NaN on both sides (poison left untouched), and
// infinities must match exactly.
inline ::testing::AssertionResult close_floats(const Tensor& cpu, const Tensor& gpu, double atol,
                                               double rtol) {
  const std::size_t es = cpu.view().element_size();
  const std::size_t n = cpu.nbytes() / es;
  const auto* a = static_cast<const char*>(cpu.data());
  const auto* b = static_cast<const char*>(gpu.data());
  for (std::size_t i = 0; i < n; ++i) {
    const float x = element_as_float(a + i * es, cpu.dtype()), y = element_as_float(b + i * es, cpu.dtype());
    const bool ok = (std::isnan(x) || std::isnan(y)) ? (std::isnan(x) && std::isnan(y))
                    : (std::isinf(x) || std::isinf(y))
                        ? x == y
                        : std::fabs(double(x) - double(y)) <= atol + rtol * std::fabs(double(x));
    if (!ok) {
      return ::testing::AssertionFailure()
             << "element " << i << " of " << n << ": cpu " << x << ", gpu " << y;
    }
  }
  return ::testing::AssertionSuccess();
}

// Tolerances of one rounding to the output type after float32 arithmetic that may
// differ in the last bits (FMA contraction, exp2 implementations).
inline double rel_tol(DType t) {
  switch (t) {
    case DType::kBF16:
      return 1.0 / 128;
    case DType::kF16:
      return 1.0 / 1024;
    default:
      return 1e-5;
  }
}

// A fixed-capacity wrapper's run(), captured once: exec becomes the instantiated
// graph of what run() launches on `stream`.
template <class Run>
::testing::AssertionResult capture_graph(cudaGraphExec_t& exec, cudaStream_t stream, Run&& run) {
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
  if (e == cudaSuccess) {
    run();
    e = cudaStreamEndCapture(stream, &graph);
  }
  if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (e != cudaSuccess) return ::testing::AssertionFailure() << "graph capture: " << cudaGetErrorString(e);
  return ::testing::AssertionSuccess();
}

// The captured graph run once more (after a re-plan), waited for.
inline ::testing::AssertionResult replay_graph(cudaGraphExec_t exec, cudaStream_t stream) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaGraphLaunch(exec, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return ::testing::AssertionFailure() << "graph replay: " << cudaGetErrorString(e);
  return ::testing::AssertionSuccess();
}

// A fixed-capacity wrapper's run() in a CUDA graph: captured at the first call (exec
// still null), then replayed each time after `poison` wrote over the outputs.
template <class Run, class Poison>
::testing::AssertionResult run_in_graph(cudaGraphExec_t& exec, cudaStream_t stream, Run&& run, Poison&& poison) {
  if (exec == nullptr) {
    ::testing::AssertionResult captured = capture_graph(exec, stream, run);
    if (!captured) return captured;
  }
  poison();
  return replay_graph(exec, stream);
}

// What the GPU case grids vary by case number n besides their shapes: fp8 KV's
// scales, the LSE or none, a window, a soft cap, RoPE or ALiBi.
inline void vary_options(AttentionCase& c, int n) {
  if (is_fp8(c.kv_dtype)) {
    c.k_scale = 0.5f;
    c.v_scale = 1.5f;
  }
  c.with_lse = n % 4 != 3;
  if (n % 6 == 2) c.options.window_left = 100;
  if (n % 7 == 3) c.options.logits_soft_cap = 30.0f;
  if (n % 9 == 4) c.options.pos_encoding = PosEncoding::kRopeLlama;
  if (n % 9 == 7) c.options.pos_encoding = PosEncoding::kAlibi;
}

// The problem both deterministic tests run (decode, paged prefill): 16 bf16 query
// heads over 4 KV heads of head_dim 128, three long requests cut into fixed chunks
// of 512 keys.
inline AttentionCase fixed_split_case(Wrapper wrapper, std::vector<std::int32_t> qo_lens) {
  AttentionCase c = bf16_case("", wrapper, 16, 4, 128, std::move(qo_lens), {3000, 700, 5000});
  c.split.fixed_split_size = 512;
  return c;
}

// With a fixed split size both backends attend the same chunks: the GPU output is
// within `atol` of the CPU's, and a second GPU run repeats it bitwise (no atomics, a
// fixed merge order).
inline void expect_deterministic_and_close_to_cpu(const AttentionCase& c, double atol) {
  const CaseOutput gpu = run_attention_case_raw(c, Device::cuda(0));
  const CaseOutput cpu = run_attention_case_raw(c, Device::cpu());
  ASSERT_EQ(gpu.o.size(), cpu.o.size());
  for (std::size_t i = 0; i < gpu.o.size(); ++i) ASSERT_NEAR(gpu.o[i], cpu.o[i], atol) << i;
  const CaseOutput again = run_attention_case_raw(c, Device::cuda(0));
  EXPECT_EQ(gpu.o, again.o);
  EXPECT_EQ(gpu.lse, again.lse);
}

}  // namespace kvinfer::testing
