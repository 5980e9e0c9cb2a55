// SPDX-License-Identifier: Apache-2.0
#include <cuda_runtime.h>

#include <string>

#include "cuda/check.cuh"
#include "cuda/runtime.hpp"

namespace kvinfer::cuda {

int device_count() {
  int n = 0;
  // No driver or no GPU is not an error for a query: it means zero devices.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

void* malloc_device(std::size_t bytes, int device) {
  KVINFER_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  KVINFER_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

void free_device(void* ptr, int device) {
  cudaSetDevice(device);
  cudaFree(ptr);  // errors at teardown are not actionable
}

void* malloc_pinned(std::size_t bytes) {
  void* p = nullptr;
  KVINFER_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}

void free_pinned(void* ptr) { cudaFreeHost(ptr); }

void memcpy_async(void* dst, const void* src, std::size_t bytes, Stream stream) {
  KVINFER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
}

void memset_async(void* dst, int byte, std::size_t bytes, Stream stream) {
  KVINFER_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, static_cast<cudaStream_t>(stream)));
}

void stream_synchronize(Stream stream) {
  KVINFER_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

int multiprocessor_count(int device) {
  int n = 0;
  KVINFER_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n;
}

bool hopper_device(int device) {
#ifdef KVINFER_CUDA_SM90A
  int major = 0, minor = 0;
  KVINFER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  KVINFER_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
#else
  (void)device;
  return false;
#endif
}

Stream create_stream(int device) {
  KVINFER_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  KVINFER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void destroy_stream(Stream stream) { cudaStreamDestroy(static_cast<cudaStream_t>(stream)); }  // at teardown

Event create_event(int device) {
  KVINFER_CUDA_CHECK(cudaSetDevice(device));
  cudaEvent_t e = nullptr;
  KVINFER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void destroy_event(Event event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }  // at teardown

void record_event(Event event, Stream stream) {
  KVINFER_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

void stream_wait_event(Stream stream, Event event) {
  KVINFER_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}

Event create_timing_event(int device) {
  KVINFER_CUDA_CHECK(cudaSetDevice(device));
  cudaEvent_t e = nullptr;
  KVINFER_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void event_synchronize(Event event) {
  KVINFER_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

float elapsed_ms(Event start, Event stop) {
  float ms = 0.0f;
  KVINFER_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(stop)));
  return ms;
}

}  // namespace kvinfer::cuda
