// SPDX-License-Identifier: Apache-2.0
#include <cstdint>
#include <stdexcept>
#include <string>

#include "late_writes.hpp"

namespace kvinfer::testing {
namespace {

constexpr int kMaxCopies = 4;

struct Copies {
  LateCopy copy[kMaxCopies];
  int count;
  std::uint64_t delay_ns;
};

__device__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ void copy_bytes(const LateCopy& c) {
  const auto* src = static_cast<const uint4*>(c.src);
  auto* dst = static_cast<uint4*>(c.dst);
  const std::size_t units = c.bytes / 16, first = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  for (std::size_t i = first; i < units; i += std::size_t(gridDim.x) * blockDim.x) dst[i] = src[i];
  if (first < c.bytes % 16) {  // the tail past the last whole 16 bytes (an odd count of int32 page ids)
    const std::size_t at = units * 16 + first;
    static_cast<unsigned char*>(c.dst)[at] = static_cast<const unsigned char*>(c.src)[at];
  }
}

__global__ void late_copies_kernel(const __grid_constant__ Copies a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (threadIdx.x == 0) {
    const std::uint64_t t0 = global_ns();
    while (global_ns() - t0 < a.delay_ns) __nanosleep(1000);
  }
  __syncthreads();
  for (int i = 0; i < a.count; ++i) copy_bytes(a.copy[i]);
}

__global__ void eager_copy_kernel(const __grid_constant__ LateCopy c) {
  copy_bytes(c);  // no griddepcontrol.wait: the point of this kernel
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

void launch_late_copies(std::span<const LateCopy> copies, int delay_us, cudaStream_t stream) {
  if (copies.size() > std::size_t(kMaxCopies))
    throw std::invalid_argument("launch_late_copies: at most 4 copies");
  Copies a{};
  for (std::size_t i = 0; i < copies.size(); ++i) a.copy[i] = copies[i];
  a.count = int(copies.size());
  a.delay_ns = std::uint64_t(delay_us) * 1000u;
  // Few threads per SM, so that the successor's CTAs fit beside these while they wait.
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  late_copies_kernel<<<unsigned(sms), 128, 0, stream>>>(a);
  check(cudaGetLastError(), "late_copies_kernel");
}

void load_late_write_kernels() {
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  launch_late_copies({}, 0, stream);
  launch_eager_copy({}, stream);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

void launch_eager_copy(const LateCopy& copy, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(4);
  config.blockDim = dim3(128);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check(cudaLaunchKernelEx(&config, eager_copy_kernel, copy), "eager_copy_kernel");
}

}  // namespace kvinfer::testing
