// SPDX-License-Identifier: Apache-2.0
// Shared measuring tools of the CUDA benchmarks: event timing with cold L2, random
// device data, and the ceilings (read bandwidth, copy bandwidth, bf16 GEMM rate)
// that every benchmark run reports its figures against.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/check.cuh"

namespace kvinfer::bench {

struct Timing {
  double median_us = 0, min_us = 0, p10_us = 0, p90_us = 0;
  int runs = 0;
};

// Times `fn` (which enqueues work on `stream`) with CUDA events: untimed calls, at
// least `warmup` and for at least kWarmUpMs, then `runs` timed ones, each preceded
// (outside the events) by a read of a buffer several times the L2 so that every run
// starts with a cold L2. The flush also keeps the GPU busy while the host enqueues fn,
// so host launch overhead is not counted. The first call of a process first keeps
// the device busy for 200 ms.
class GpuTimer {
 public:
  explicit GpuTimer(cudaStream_t stream = nullptr);
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  // Untimed calls of each case last at least this long, as the timed ones do (flush,
  // then fn): the first case of a process measured slower than the same case later
  // in the process (1x32k decode: 46.3 us over its first 25 runs, 43.4 over 300; the
  // first prefill case bimodal, 695 or 823-847 us) despite the 200 ms device warm-up.
  static constexpr double kWarmUpMs = 50.0;

  Timing time(const std::function<void()>& fn, int warmup = 5, int runs = 30, bool cold_l2 = true);
  void flush_l2();
  // Busy for `ms` milliseconds, so that the clocks have left their idle state; time()
  // calls it once per process.
  void warm_up_device(double ms);
  cudaStream_t stream() const { return stream_; }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
  void* flush_buf_ = nullptr;
  std::size_t flush_bytes_ = 0;
  int flush_grid_ = 0;
};

// Fills `bytes` of device memory with pseudo-random bits (a counter hash: fast, and
// never all zeros).
void fill_random_bits(void* p, std::size_t bytes, std::uint64_t seed, cudaStream_t stream = nullptr);
// Fills `count` values uniform in [-1, 1) of dtype f32 (kind 0), f16 (1) or bf16 (2).
enum class RandomKind { kF32, kF16, kBF16 };
void fill_random_uniform(void* p, std::size_t count, RandomKind kind, std::uint64_t seed,
                         cudaStream_t stream = nullptr);

struct DeviceInfo {
  std::string name;
  int sm_count = 0, l2_bytes = 0, cc_major = 0, cc_minor = 0, driver = 0, runtime = 0;
  double mem_gib = 0;
};
DeviceInfo device_info();

struct Ceiling {
  std::string name;
  double value = 0;  // GB/s or TFLOP/s
  std::string unit;
  Timing timing;
  std::string detail;  // variant that gave the value
};

// Read bandwidth: a kernel that streams `bytes` (>= 4 GiB) once with 16-byte loads and
// reduces them; the best of a few launch shapes. GB/s = bytes read / time.
Ceiling measure_read_bandwidth(std::size_t bytes = std::size_t(4) << 30,
                               std::vector<Ceiling>* variants = nullptr);
// One read of `bytes` (a fresh buffer, cold L2, timed as GpuTimer times a case): the
// best of the grid-stride and the tiled read kernel. What any kernel that streams
// that many bytes once pays at that size, launch and ramp-up included; GB/s = bytes /
// time.
Ceiling measure_read_of(std::size_t bytes, GpuTimer& timer, int runs = 20);
// Copies of `bytes` (a fresh pair of buffers, cold L2, timed as GpuTimer times a case)
// by cudaMemcpyAsync and by copy kernels of a few shapes, and an empty kernel's launch:
// what a memory-bound kernel of that size pays besides its bytes (launch, ramp-up,
// tail). GB/s = bytes read + written / time (for the empty kernel, of the same bytes).
std::vector<Ceiling> measure_copies_of(std::size_t bytes, GpuTimer& timer, int runs = 20);
// Reads of `bytes` shaped like the decode tiles' (8 warps per SM, each warp or CTA
// streaming its own region, or the 256-byte head pieces of NHD token rows), to tell
// what the access pattern alone costs against the read bandwidth. GB/s = bytes / time.
std::vector<Ceiling> measure_read_patterns(std::size_t bytes = std::size_t(4) << 30);
// Device-to-device cudaMemcpyAsync of `bytes`; GB/s counts bytes read + written.
Ceiling measure_copy_bandwidth(std::size_t bytes = std::size_t(2) << 30);
// The same with a 16-byte-vector copy kernel (a second opinion on the copy ceiling).
Ceiling measure_copy_kernel_bandwidth(std::size_t bytes = std::size_t(2) << 30);
// cuBLAS bf16 GEMM (fp32 accumulation) m x n x k on random data; TFLOP/s.
// value 0 and detail "cuBLAS not built" when the benchmarks were built without cuBLAS.
Ceiling measure_gemm_bf16(int m = 8192, int n = 8192, int k = 8192);

}  // namespace kvinfer::bench
