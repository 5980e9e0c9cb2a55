// SPDX-License-Identifier: Apache-2.0
// The CPU backend's memory, streams and planning traits: host memory, work in the
// calling thread (and the process's one thread pool), no streams or events.
#include "cpu/backend.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "cpu/thread_pool.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cpu {
namespace {

// The CPU kernels' query tile: 64 packed rows per work item.
constexpr std::int32_t kQTileRows = 64;

}  // namespace

std::string_view CpuBackend::name() const {
  return "cpu";
}
int CpuBackend::device_count() const {
  return 1;
}

void* CpuBackend::allocate(std::size_t bytes, int) const {
  // Large buffers (KV caches) are read page by page in the page table's order, a
  // TLB miss per 4 KiB: on 2 MiB-aligned memory Linux can back them with huge pages
  // (paged decode ~10% faster on the CPU backend).
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  const bool huge = bytes >= 2 * kHuge;
  const std::size_t align = huge ? kHuge : 64;
  // A size near SIZE_MAX would wrap when rounded up.
  void* ptr = bytes <= SIZE_MAX - align ? std::aligned_alloc(align, (bytes + align - 1) / align * align) : nullptr;
  if (ptr == nullptr) {
    throw Error("Tensor::empty", "bytes", std::to_string(bytes), "out of host memory (allocation failed)");
  }
  const std::size_t rounded = (bytes + align - 1) / align * align;
#ifdef MADV_HUGEPAGE
  if (huge) ::madvise(ptr, rounded, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
  return ptr;
}
void CpuBackend::deallocate(void* ptr, int) const {
  std::free(ptr);
}
void CpuBackend::copy_async(void* dst, const void* src, std::size_t bytes, Stream) const {
  std::memcpy(dst, src, bytes);
}
void CpuBackend::fill_async(void* dst, std::uint8_t byte, std::size_t bytes, Stream) const {
  std::memset(dst, byte, bytes);
}
void CpuBackend::synchronize(Stream) const {}

Stream CpuBackend::create_stream(int) const {
  return nullptr;
}
void CpuBackend::destroy_stream(Stream) const {}
CpuBackend::Event CpuBackend::create_event(int, bool) const {
  return nullptr;
}
void CpuBackend::destroy_event(Event) const {}
void CpuBackend::record_event(Event, Stream) const {}
void CpuBackend::stream_wait_event(Stream, Event) const {}
void CpuBackend::event_synchronize(Event) const {}
float CpuBackend::elapsed_ms(Event, Event) const {
  return 0.0f;
}

detail::DeviceProfile CpuBackend::profile(int) const {
  return detail::DeviceProfile::cpu(num_threads());
}
// The thread pool balances several items per thread: the automatic split may fill
// the threads four times over (the traits' default split_waves). The kernel is
// chosen when a plan is made: that is when the threads' scratch is made large
// enough for it, so that run() takes its buffers without allocating.
detail::AttentionKernelTraits CpuBackend::attention_kernel(const detail::AttentionProblem& problem, int) const {
  reserve_scratch(attention_scratch_bytes(problem, kQTileRows));
  return {.q_tile_rows = kQTileRows};
}
detail::MlaKernelTraits CpuBackend::mla_kernel(const detail::MLAProblem& problem, std::int64_t, int) const {
  reserve_scratch(mla_scratch_bytes(problem, kQTileRows));
  return {.q_tile_rows = kQTileRows};
}

const detail::Backend& backend() {
  static const CpuBackend instance;
  return instance;
}

}  // namespace kvinfer::cpu
