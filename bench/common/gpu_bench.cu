// SPDX-License-Identifier: Apache-2.0
// Event timing, random device data and the ceiling kernels of the CUDA benchmarks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "bench/common/gpu_bench.hpp"

#ifdef KVINFER_BENCH_HAVE_CUBLAS
#include <cublas_v2.h>
#endif

#include "cuda/common/ptx.cuh"

namespace kvinfer::bench {
namespace {

constexpr int kThreads = 256;

__host__ __device__ inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void fill_bits_kernel(std::uint64_t* p, std::size_t words, std::uint64_t seed) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = splitmix64(seed ^ (i * 0xD1B54A32D192ED03ull));
  }
}

__global__ void fill_tail_kernel(std::uint8_t* p, std::size_t bytes, std::uint64_t seed) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < bytes) p[i] = std::uint8_t(splitmix64(seed + i) | 1);
}

template <class T>
__global__ void fill_uniform_kernel(T* p, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    // 24 random bits -> [-1, 1)
    const float u = float(splitmix64(seed ^ (i * 0xD1B54A32D192ED03ull)) >> 40) * (2.0f / 16777216.0f) - 1.0f;
    if constexpr (std::is_same_v<T, float>) {
      p[i] = u;
    } else if constexpr (std::is_same_v<T, __half>) {
      p[i] = __float2half_rn(u);
    } else {
      p[i] = __float2bfloat16_rn(u);
    }
  }
}

// 16-byte streaming loads: kLoad 0 asks L2 to prefetch 256-byte blocks, 1 does not.
template <int kLoad>
__device__ __forceinline__ uint4 stream_load(const uint4* p) {
  if constexpr (kLoad == 0) {
    return cuda::ptx::ld_stream_v4(p);
  } else {
    return cuda::ptx::ld_nc_na_v4(p);
  }
}

__device__ __forceinline__ void reduce_out(std::uint32_t acc, unsigned long long* out) {
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, (unsigned long long)acc);
}

// Streams n 16-byte vectors once: kUnroll independent loads in flight per thread,
// grid-stride so that each sweep of the grid reads one contiguous region. The
// reduction (sum of xors) keeps every load alive.
template <int kUnroll, int kLoad>
__global__ void __launch_bounds__(kThreads)
    read_reduce_kernel(const uint4* __restrict__ p, std::size_t n, unsigned long long* __restrict__ out) {
  const std::size_t stride = std::size_t(gridDim.x) * kThreads;
  std::size_t i = std::size_t(blockIdx.x) * kThreads + threadIdx.x;
  std::uint32_t acc = 0;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = stream_load<kLoad>(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = stream_load<kLoad>(p + i);
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  reduce_out(acc, out);
}

// The same with one contiguous tile of kThreads x kUnroll vectors per block and as
// many blocks as tiles (the hardware schedules blocks as others finish).
template <int kUnroll, int kLoad>
__global__ void __launch_bounds__(kThreads)
    read_tiles_kernel(const uint4* __restrict__ p, std::size_t n, unsigned long long* __restrict__ out) {
  const std::size_t base = std::size_t(blockIdx.x) * kThreads * kUnroll + threadIdx.x;
  uint4 v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::size_t i = base + std::size_t(u) * kThreads;
    v[u] = i < n ? stream_load<kLoad>(p + i) : make_uint4(0, 0, 0, 0);
  }
  std::uint32_t acc = 0;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) acc += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  reduce_out(acc, out);
}

template <int kUnroll>
__global__ void __launch_bounds__(kThreads)
    copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  const std::size_t stride = std::size_t(gridDim.x) * kThreads;
  std::size_t i = std::size_t(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = cuda::ptx::ld_stream_v4(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) cuda::ptx::st_v4(dst + i + u * stride, v[u]);
  }
  for (; i < n; i += stride) cuda::ptx::st_v4(dst + i, cuda::ptx::ld_stream_v4(src + i));
}

// One block per kThreads x kUnroll vectors: the shape of the append's register kernel
// (a block loads its vectors, then stores them), without its index lookups.
template <int kThreads_, int kUnroll>
__global__ void __launch_bounds__(kThreads_)
    copy_tiles_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  const std::size_t base = std::size_t(blockIdx.x) * kThreads_ * kUnroll + threadIdx.x;
  uint4 v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::size_t i = base + std::size_t(u) * kThreads_;
    if (i < n) v[u] = cuda::ptx::ld_stream_v4(src + i);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::size_t i = base + std::size_t(u) * kThreads_;
    if (i < n) cuda::ptx::st_v4(dst + i, v[u]);
  }
}

__global__ void empty_kernel() {}

// Reads shaped like a decode kernel's, to tell what an access pattern costs by itself.
// A stream is a group of kGroup warps reading rows of kRowBytes (a multiple of 256) one
// after the other, row_stride bytes apart: every warp-wide load takes 512 bytes (two
// 256-byte pieces, or 512 contiguous bytes of one row), and each lane keeps kUnroll
// 16-byte loads in flight. Warp m of a group takes every kGroup-th step. Streams are
// laid out as `heads` streams interleaved in each row (the KV heads of a token row of
// an NHD page: stream s at (s / heads) * stream_offset + (s % heads) * row_bytes), or
// one per region (heads 1).
template <int kUnroll, int kGroup, int kRowBytes = 256>
__global__ void __launch_bounds__(kThreads)
    read_streams_kernel(const char* __restrict__ p, std::size_t stream_rows, std::size_t row_stride,
                        std::size_t stream_offset, int heads, unsigned long long* __restrict__ out) {
  const std::size_t warp = (std::size_t(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int lane = int(threadIdx.x % 32);
  const std::size_t stream = warp / kGroup;
  const int member = int(warp % kGroup);
  const char* base = p + (stream / heads) * stream_offset + (stream % heads) * std::size_t(kRowBytes);
  // One step: 512 bytes per warp-wide load; a lane's 16 bytes at (row, col) of the step.
  constexpr int kPerRow = kRowBytes / 16;  // 16-byte vectors per row (a power of two)
  const std::size_t vecs = stream_rows * kPerRow;
  std::uint32_t acc = 0;
  for (std::size_t v0 = (std::size_t(member) * kUnroll) * 32; v0 < vecs; v0 += std::size_t(kGroup) * kUnroll * 32) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::size_t i = min(v0 + std::size_t(u) * 32 + lane, vecs - 1);
      const std::size_t row = i / kPerRow, col = i % kPerRow;
      v[u] = cuda::ptx::ld_nc_na_v4(base + row * row_stride + col * 16);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) atomicAdd(out, (unsigned long long)acc);
}

Timing summarize(std::vector<float> ms) {
  Timing t;
  if (ms.empty()) return t;
  std::sort(ms.begin(), ms.end());
  auto q = [&](double f) { return 1e3 * double(ms[std::size_t(f * double(ms.size() - 1) + 0.5)]); };
  t.median_us = ms.size() % 2 ? 1e3 * ms[ms.size() / 2]
                              : 1e3 * 0.5 * (double(ms[ms.size() / 2 - 1]) + double(ms[ms.size() / 2]));
  t.min_us = 1e3 * double(ms.front());
  t.p10_us = q(0.1);
  t.p90_us = q(0.9);
  t.runs = int(ms.size());
  return t;
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { KVINFER_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

int sm_count() {
  int dev = 0, n = 0;
  KVINFER_CUDA_CHECK(cudaGetDevice(&dev));
  KVINFER_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

// The read kernels' launches over n 16-byte elements: grid-stride with BlocksPerSM
// resident blocks per SM, or one block per tile of kThreads * Unroll elements.
template <int Unroll, int Hint, int BlocksPerSM>
void launch_grid_stride(const uint4* src, std::size_t n, unsigned long long* acc, int sms, cudaStream_t stream) {
  read_reduce_kernel<Unroll, Hint><<<unsigned(sms * BlocksPerSM), kThreads, 0, stream>>>(src, n, acc);
}
template <int Unroll, int Hint>
void launch_tiles(const uint4* src, std::size_t n, unsigned long long* acc, int, cudaStream_t stream) {
  read_tiles_kernel<Unroll, Hint>
      <<<unsigned((n + kThreads * Unroll - 1) / (kThreads * Unroll)), kThreads, 0, stream>>>(src, n, acc);
}

}  // namespace

GpuTimer::GpuTimer(cudaStream_t stream) : stream_(stream) {
  KVINFER_CUDA_CHECK(cudaEventCreate(&start_));
  KVINFER_CUDA_CHECK(cudaEventCreate(&stop_));
  int dev = 0, l2 = 0;
  KVINFER_CUDA_CHECK(cudaGetDevice(&dev));
  KVINFER_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  // Several times the L2, and at least 256 MiB: long enough (~100 us) to cover the
  // host's enqueueing of the timed work.
  flush_bytes_ = std::max<std::size_t>(std::size_t(4) * std::size_t(l2), std::size_t(256) << 20) / 16 * 16;
  // The flush buffer, then its reduction's accumulator.
  KVINFER_CUDA_CHECK(cudaMalloc(&flush_buf_, flush_bytes_ + 64));
  KVINFER_CUDA_CHECK(cudaMemset(flush_buf_, 0x5A, flush_bytes_ + 64));
  flush_grid_ = sm_count() * 8;
}

GpuTimer::~GpuTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
  cudaFree(flush_buf_);
}

// A read, not a write: the L2 ends up full of clean lines, so the timed work pays no
// write-back of the flush's data when it evicts them.
void GpuTimer::flush_l2() {
  auto* acc = reinterpret_cast<unsigned long long*>(static_cast<char*>(flush_buf_) + flush_bytes_);
  read_reduce_kernel<4, 0><<<unsigned(flush_grid_), kThreads, 0, stream_>>>(
      static_cast<const uint4*>(flush_buf_), flush_bytes_ / 16, acc);
  KVINFER_CUDA_CHECK(cudaGetLastError());
}

// Keeps the device busy (L2 flushes) for at least `ms` milliseconds. An idle GPU
// sits at a low clock (an idle H200 reports 345 MHz) and takes a while to boost:
// without this, the first case of a run measured bimodal (64x4k fp8 decode run
// first: median 195 us, p10 173; run after other cases: 172-177).
void GpuTimer::warm_up_device(double ms) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < ms) {
    for (int i = 0; i < 64; ++i) flush_l2();
    KVINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
}

Timing GpuTimer::time(const std::function<void()>& fn, int warmup, int runs, bool cold_l2) {
  static bool device_warm = false;  // once per process, before its first timing
  if (!device_warm) {
    warm_up_device(200.0);
    device_warm = true;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup ||
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < kWarmUpMs;
       ++i) {
    if (cold_l2) flush_l2();
    fn();
    if (i % 8 == 7) KVINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the clock measures the device's time
  }
  KVINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<float> ms;
  ms.reserve(std::size_t(runs));
  for (int i = 0; i < runs; ++i) {
    if (cold_l2) flush_l2();
    KVINFER_CUDA_CHECK(cudaEventRecord(start_, stream_));
    fn();
    KVINFER_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    KVINFER_CUDA_CHECK(cudaEventSynchronize(stop_));
    float t = 0;
    KVINFER_CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
    ms.push_back(t);
  }
  KVINFER_CUDA_CHECK(cudaGetLastError());
  return summarize(std::move(ms));
}

void fill_random_bits(void* p, std::size_t bytes, std::uint64_t seed, cudaStream_t stream) {
  const std::size_t words = bytes / 8;
  if (words > 0) {
    const unsigned grid = unsigned(std::min<std::size_t>((words + kThreads - 1) / kThreads, 65536));
    fill_bits_kernel<<<grid, kThreads, 0, stream>>>(static_cast<std::uint64_t*>(p), words, seed);
    KVINFER_CUDA_CHECK(cudaGetLastError());
  }
  if (bytes % 8) {
    fill_tail_kernel<<<1, 8, 0, stream>>>(static_cast<std::uint8_t*>(p) + words * 8, bytes % 8, seed);
    KVINFER_CUDA_CHECK(cudaGetLastError());
  }
}

void fill_random_uniform(void* p, std::size_t count, RandomKind kind, std::uint64_t seed,
                         cudaStream_t stream) {
  if (count == 0) return;
  const unsigned grid = unsigned(std::min<std::size_t>((count + kThreads - 1) / kThreads, 65536));
  switch (kind) {
    case RandomKind::kF32:
      fill_uniform_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float*>(p), count, seed);
      break;
    case RandomKind::kF16:
      fill_uniform_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__half*>(p), count, seed);
      break;
    case RandomKind::kBF16:
      fill_uniform_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(p), count, seed);
      break;
  }
  KVINFER_CUDA_CHECK(cudaGetLastError());
}

DeviceInfo device_info() {
  DeviceInfo d;
  int dev = 0;
  KVINFER_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  KVINFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  d.name = prop.name;
  d.sm_count = prop.multiProcessorCount;
  d.l2_bytes = prop.l2CacheSize;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.mem_gib = double(prop.totalGlobalMem) / double(1ull << 30);
  KVINFER_CUDA_CHECK(cudaDriverGetVersion(&d.driver));
  KVINFER_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime));
  return d;
}

Ceiling measure_read_bandwidth(std::size_t bytes, std::vector<Ceiling>* variants) {
  bytes = bytes / 16 * 16;
  DeviceBuffer buf(bytes), out(sizeof(unsigned long long));
  fill_random_bits(buf.p, bytes, 0x5EED);
  GpuTimer timer;
  const int sms = sm_count();
  const std::size_t n = bytes / 16;
  auto* src = static_cast<const uint4*>(buf.p);
  auto* acc = static_cast<unsigned long long*>(out.p);
  Ceiling best{"read_bandwidth", 0, "GB/s", {}, ""};
  struct Shape {
    const char* name;
    void (*launch)(const uint4*, std::size_t, unsigned long long*, int sms, cudaStream_t);
  };
  // Grid-stride kernels with 8 resident blocks of 256 threads per SM (a full H100/H200
  // SM), or half; tiled kernels with one block per tile.
  const Shape shapes[] = {
      {"grid-stride, unroll 4, L2::256B, 8 blocks/SM", launch_grid_stride<4, 0, 8>},
      {"grid-stride, unroll 8, L2::256B, 4 blocks/SM", launch_grid_stride<8, 0, 4>},
      {"grid-stride, unroll 4, no L2 hint, 8 blocks/SM", launch_grid_stride<4, 1, 8>},
      {"grid-stride, unroll 8, no L2 hint, 8 blocks/SM", launch_grid_stride<8, 1, 8>},
      {"tiles, unroll 4, L2::256B", launch_tiles<4, 0>},
      {"tiles, unroll 8, L2::256B", launch_tiles<8, 0>},
      {"tiles, unroll 8, no L2 hint", launch_tiles<8, 1>},
  };
  for (const Shape& shape : shapes) {
    // A 4 GiB stream is far beyond the L2: every run is cold without a flush.
    const Timing t = timer.time([&] { shape.launch(src, n, acc, sms, nullptr); }, 3, 20, false);
    Ceiling c{"read_bandwidth", double(bytes) / (t.median_us * 1e3), "GB/s", t, shape.name};
    if (variants) variants->push_back(c);
    if (c.value > best.value) best = c;
  }
  return best;
}

Ceiling measure_read_of(std::size_t bytes, GpuTimer& timer, int runs) {
  bytes = bytes / 16 * 16;
  DeviceBuffer buf(bytes), out(sizeof(unsigned long long));
  fill_random_bits(buf.p, bytes, 0x5EED, timer.stream());
  const int sms = sm_count();
  const std::size_t n = bytes / 16;
  auto* src = static_cast<const uint4*>(buf.p);
  auto* acc = static_cast<unsigned long long*>(out.p);
  const cudaStream_t stream = timer.stream();
  const Timing grid_stride =
      timer.time([&] { launch_grid_stride<4, 1, 8>(src, n, acc, sms, stream); }, 3, runs, true);
  const Timing tiles = timer.time([&] { launch_tiles<8, 1>(src, n, acc, sms, stream); }, 3, runs, true);
  const bool first = grid_stride.median_us <= tiles.median_us;
  const Timing& t = first ? grid_stride : tiles;
  return {"read_of_size", double(bytes) / (t.median_us * 1e3), "GB/s", t,
          first ? "grid-stride, unroll 4, no L2 hint, 8 blocks/SM" : "tiles, unroll 8, no L2 hint"};
}

std::vector<Ceiling> measure_copies_of(std::size_t bytes, GpuTimer& timer, int runs) {
  bytes = bytes / 16 * 16;
  DeviceBuffer a(bytes), b(bytes);
  fill_random_bits(a.p, bytes, 0xC0FFEE, timer.stream());
  const std::size_t n = bytes / 16;
  auto* src = static_cast<const uint4*>(a.p);
  auto* dst = static_cast<uint4*>(b.p);
  const cudaStream_t stream = timer.stream();
  std::vector<Ceiling> result;
  const auto run = [&](const char* name, auto launch) {
    const Timing t = timer.time([&] { launch(); }, 3, runs, true);
    result.push_back({"copy_of_size", 2.0 * double(bytes) / (t.median_us * 1e3), "GB/s", t, name});
  };
  run("cudaMemcpyAsync D2D", [&] { KVINFER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream)); });
  run("copy kernel, grid-stride, unroll 4, 8 x 256 threads per SM",
      [&] { copy_kernel<4><<<unsigned(sm_count() * 8), kThreads, 0, stream>>>(src, dst, n); });
  run("copy kernel, a block per 128 threads x 4 vectors", [&] {
    copy_tiles_kernel<128, 4><<<unsigned((n + 511) / 512), 128, 0, stream>>>(src, dst, n);
  });
  run("copy kernel, a block per 128 threads x 2 vectors", [&] {
    copy_tiles_kernel<128, 2><<<unsigned((n + 255) / 256), 128, 0, stream>>>(src, dst, n);
  });
  run("copy kernel, a block per 256 threads x 4 vectors", [&] {
    copy_tiles_kernel<256, 4><<<unsigned((n + 1023) / 1024), 256, 0, stream>>>(src, dst, n);
  });
  // The floor of any kernel timed this way: launch and completion of an empty grid.
  run("empty kernel (launch floor)", [&] { empty_kernel<<<1, 32, 0, stream>>>(); });
  KVINFER_CUDA_CHECK(cudaGetLastError());
  return result;
}

std::vector<Ceiling> measure_read_patterns(std::size_t bytes) {
  bytes = bytes / (std::size_t(1) << 20) * (std::size_t(1) << 20);
  DeviceBuffer buf(bytes), out(sizeof(unsigned long long));
  fill_random_bits(buf.p, bytes, 0x5EED);
  GpuTimer timer;
  const int sms = sm_count();
  const char* src = static_cast<const char*>(buf.p);
  auto* acc = static_cast<unsigned long long*>(out.p);
  std::vector<Ceiling> result;
  // warps: 8 per SM, as the decode tiles run. Each case reads all `bytes` once.
  const std::size_t warps = std::size_t(sms) * 8;
  const unsigned blocks = unsigned(warps * 32 / kThreads);
  const auto run = [&](const char* name, auto launch) {
    const Timing t = timer.time([&] { launch(); }, 3, 20, false);
    result.push_back({"read_pattern", double(bytes) / (t.median_us * 1e3), "GB/s", t, name});
  };
  // One contiguous region per warp (a decode warp's keys of a contiguous HND cache):
  // 8 KB (16 x 512 B) and 16 KB in flight per warp, as one and two 16-key bf16 tiles.
  const std::size_t per_warp_rows = bytes / warps / 256;
  run("1056 warp streams, 256 B rows back to back, 8 KB in flight per warp", [&] {
    read_streams_kernel<16, 1><<<blocks, kThreads>>>(src, per_warp_rows, 256, per_warp_rows * 256, 1, acc);
  });
  run("1056 warp streams, 256 B rows back to back, 16 KB in flight per warp", [&] {
    read_streams_kernel<32, 1><<<blocks, kThreads>>>(src, per_warp_rows, 256, per_warp_rows * 256, 1, acc);
  });
  // One region per CTA of 8 warps taking its steps in turn (cuDNN's shape: one stream
  // per SM, 64 KB per step of the CTA).
  run("132 CTA streams of 8 warps, 8 KB in flight per warp", [&] {
    read_streams_kernel<16, 8><<<blocks, kThreads>>>(src, per_warp_rows * 8, 256, per_warp_rows * 8 * 256, 1, acc);
  });
  // A paged NHD cache of 8 KV heads with pages in order: warp (request, head) reads the
  // head's 256-byte piece of every 2 KB token row (8 warps share each region).
  run("1056 warp streams, 256 B pieces 2 KB apart (NHD heads), 16 KB in flight per warp", [&] {
    read_streams_kernel<32, 1><<<blocks, kThreads>>>(src, per_warp_rows, 2048, per_warp_rows * 2048, 8, acc);
  });
  KVINFER_CUDA_CHECK(cudaGetLastError());
  return result;
}

Ceiling measure_copy_bandwidth(std::size_t bytes) {
  DeviceBuffer a(bytes), b(bytes);
  fill_random_bits(a.p, bytes, 0xC0FFEE);
  GpuTimer timer;
  const Timing t = timer.time(
      [&] { KVINFER_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice)); }, 3, 20, false);
  return {"copy_bandwidth", 2.0 * double(bytes) / (t.median_us * 1e3), "GB/s", t,
          "cudaMemcpyAsync D2D, bytes read + written"};
}

Ceiling measure_copy_kernel_bandwidth(std::size_t bytes) {
  bytes = bytes / 16 * 16;
  DeviceBuffer a(bytes), b(bytes);
  fill_random_bits(a.p, bytes, 0xC0FFEE);
  GpuTimer timer;
  const unsigned grid = unsigned(sm_count() * 8);
  const Timing t = timer.time(
      [&] {
        copy_kernel<4>
            <<<grid, kThreads>>>(static_cast<const uint4*>(a.p), static_cast<uint4*>(b.p), bytes / 16);
      },
      3, 20, false);
  return {"copy_kernel_bandwidth", 2.0 * double(bytes) / (t.median_us * 1e3), "GB/s", t,
          "16-byte vector copy kernel, unroll 4, bytes read + written"};
}

#ifdef KVINFER_BENCH_HAVE_CUBLAS
#define KVINFER_CUBLAS_CHECK(call)                                                             \
  do {                                                                                         \
    const cublasStatus_t st_ = (call);                                                         \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                        \
      throw std::runtime_error(std::string(#call) + " failed: " + cublasGetStatusString(st_)); \
    }                                                                                          \
  } while (0)

Ceiling measure_gemm_bf16(int m, int n, int k) {
  DeviceBuffer a(std::size_t(m) * k * 2), b(std::size_t(k) * n * 2), c(std::size_t(m) * n * 2);
  // cuBLAS on Hopper picks its best kernels with a 32 MiB workspace.
  DeviceBuffer workspace(std::size_t(32) << 20);
  fill_random_uniform(a.p, std::size_t(m) * k, RandomKind::kBF16, 1);
  fill_random_uniform(b.p, std::size_t(k) * n, RandomKind::kBF16, 2);
  cublasHandle_t handle;
  KVINFER_CUBLAS_CHECK(cublasCreate(&handle));
  Ceiling result{"gemm_bf16", 0, "TFLOP/s", {}, ""};
  try {
    KVINFER_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace.p, std::size_t(32) << 20));
    const float alpha = 1.0f, beta = 0.0f;
    GpuTimer timer;
    const Timing t = timer.time(
        [&] {
          KVINFER_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a.p,
                                            CUDA_R_16BF, m, b.p, CUDA_R_16BF, k, &beta, c.p, CUDA_R_16BF, m,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        },
        5, 20, false);
    result.timing = t;
    result.value = 2.0 * double(m) * n * k / (t.median_us * 1e-6) / 1e12;
    result.detail = "cublasGemmEx bf16 in/out, fp32 compute, " + std::to_string(m) + "x" + std::to_string(n) +
                    "x" + std::to_string(k) + ", random data";
  } catch (...) {
    cublasDestroy(handle);
    throw;
  }
  cublasDestroy(handle);
  return result;
}
#else
Ceiling measure_gemm_bf16(int, int, int) {
  return {"gemm_bf16", 0, "TFLOP/s", {}, "cuBLAS not built"};
}
#endif

}  // namespace kvinfer::bench
