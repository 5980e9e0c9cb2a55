// SPDX-License-Identifier: Apache-2.0
// The CPU backend: host memory, work in the calling thread (and its thread pool),
// no streams or events.
#include "cpu/backend.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdlib>
#include <cstring>
#include <new>

#include "cpu/attention.hpp"
#include "cpu/mla.hpp"
#include "cpu/ops.hpp"
#include "cpu/thread_pool.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cpu {
namespace {

// The CPU kernels' query tile: 64 packed rows per work item.
constexpr std::int32_t kQTileRows = 64;

class CpuBackend final : public detail::Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  int device_count() const override { return 1; }

  void* allocate(std::size_t bytes, int) const override {
    // Large buffers (KV caches) are read page by page in the page table's order, a
    // TLB miss per 4 KiB: on 2 MiB-aligned memory Linux can back them with huge pages
    // (paged decode ~10% faster on the CPU backend).
    constexpr std::size_t kHuge = std::size_t(2) << 20;
    const bool huge = bytes >= 2 * kHuge;
    const std::size_t align = huge ? kHuge : 64;
    const std::size_t rounded = (bytes + align - 1) / align * align;
    void* ptr = std::aligned_alloc(align, rounded);
    if (ptr == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (huge) ::madvise(ptr, rounded, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
    return ptr;
  }
  void deallocate(void* ptr, int) const override {
    std::free(ptr);
  }
  void copy_async(void* dst, const void* src, std::size_t bytes, Stream) const override {
    std::memcpy(dst, src, bytes);
  }
  void fill_async(void* dst, std::uint8_t byte, std::size_t bytes, Stream) const override {
    std::memset(dst, byte, bytes);
  }
  void synchronize(Stream) const override {}

  Stream create_stream(int) const override {
    return nullptr;
  }
  void destroy_stream(Stream) const override {}
  Event create_event(int, bool) const override {
    return nullptr;
  }
  void destroy_event(Event) const override {}
  void record_event(Event, Stream) const override {}
  void stream_wait_event(Stream, Event) const override {}
  void event_synchronize(Event) const override {}
  float elapsed_ms(Event, Event) const override {
    return 0.0f;
  }

  detail::DeviceProfile profile(int) const override {
    return detail::DeviceProfile::cpu(num_threads());
  }
  // The thread pool balances several items per thread: the automatic split may fill
  // the threads four times over (ScheduleInput::split_waves).
  detail::AttentionKernelTraits attention_kernel(const detail::AttentionProblem&, int) const override {
    return {.q_tile_rows = kQTileRows};
  }
  detail::MlaKernelTraits mla_kernel(const detail::MLAProblem&, std::int64_t, int) const override {
    return {.q_tile_rows = kQTileRows};
  }

  void run_attention(const detail::AttentionParams& p) const override {
    cpu::run_attention(p);
  }
  void run_mla(const detail::MLAParams& p) const override {
    cpu::run_mla(p);
  }
  void append_paged_kv_cache(const detail::AppendPagedKVParams& p) const override {
    cpu::append_paged_kv_cache(p);
  }
  void append_paged_mla_kv_cache(const detail::AppendPagedMLAParams& p) const override {
    cpu::append_paged_mla_kv_cache(p);
  }
  void get_batch_indices_positions(const detail::BatchIndicesPositionsParams& p) const override {
    cpu::get_batch_indices_positions(p);
  }
  void get_seq_lens(const detail::SeqLensParams& p) const override {
    cpu::get_seq_lens(p);
  }
  void packbits(const detail::PackBitsParams& p) const override {
    cpu::packbits(p);
  }
  void segment_packbits(const detail::SegmentPackBitsParams& p) const override {
    cpu::segment_packbits(p);
  }
  void merge_state(const detail::MergeStateParams& p) const override {
    cpu::merge_state(p);
  }
  void merge_states(const detail::MergeStatesParams& p) const override {
    cpu::merge_states(p);
  }
};

}  // namespace

const detail::Backend& backend() {
  static const CpuBackend instance;
  return instance;
}

}  // namespace kvinfer::cpu
