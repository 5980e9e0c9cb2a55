// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's memory, streams and device profile, over the CUDA runtime
// (runtime.cu). Its kernel selection and launches are defined beside the kernels.
#include "cuda/backend.hpp"
#include "cuda/runtime.hpp"

namespace kvinfer::cuda {

std::string_view CudaBackend::name() const {
  return "cuda";
}
int CudaBackend::device_count() const {
  return cuda::device_count();
}

void* CudaBackend::allocate(std::size_t bytes, int device) const {
  return malloc_device(bytes, device);
}
void CudaBackend::deallocate(void* ptr, int device) const {
  free_device(ptr, device);
}
void CudaBackend::copy_async(void* dst, const void* src, std::size_t bytes, Stream stream) const {
  memcpy_async(dst, src, bytes, stream);
}
void CudaBackend::fill_async(void* dst, std::uint8_t byte, std::size_t bytes, Stream stream) const {
  memset_async(dst, byte, bytes, stream);
}
void CudaBackend::synchronize(Stream stream) const {
  stream_synchronize(stream);
}

Stream CudaBackend::create_stream(int device) const {
  return cuda::create_stream(device);
}
void CudaBackend::destroy_stream(Stream stream) const {
  cuda::destroy_stream(stream);
}
CudaBackend::Event CudaBackend::create_event(int device, bool timing) const {
  return timing ? create_timing_event(device) : cuda::create_event(device);
}
void CudaBackend::destroy_event(Event event) const {
  cuda::destroy_event(event);
}
void CudaBackend::record_event(Event event, Stream stream) const {
  cuda::record_event(event, stream);
}
void CudaBackend::stream_wait_event(Stream stream, Event event) const {
  cuda::stream_wait_event(stream, event);
}
void CudaBackend::event_synchronize(Event event) const {
  cuda::event_synchronize(event);
}
float CudaBackend::elapsed_ms(Event start, Event stop) const {
  return cuda::elapsed_ms(start, stop);
}

detail::DeviceProfile CudaBackend::profile(int device) const {
  return {multiprocessor_count(device), detail::DeviceProfile::h200().work_items_per_processor};
}

const detail::Backend& backend() {
  static const CudaBackend instance;
  return instance;
}

}  // namespace kvinfer::cuda
