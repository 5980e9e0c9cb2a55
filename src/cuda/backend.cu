// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: device memory and streams of the CUDA runtime, the kernel
// selectors' traits for the planner, and the launchers.
#include <algorithm>

#include "cuda/attention.hpp"
#include "cuda/backend.hpp"
#include "cuda/mla.hpp"
#include "cuda/ops.hpp"
#include "cuda/runtime.hpp"

namespace kvinfer::cuda {
namespace {

class CudaBackend final : public detail::Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  int device_count() const override { return cuda::device_count(); }

  void* allocate(std::size_t bytes, int device) const override { return malloc_device(bytes, device); }
  void deallocate(void* ptr, int device) const override { free_device(ptr, device); }
  void copy_async(void* dst, const void* src, std::size_t bytes, Stream stream) const override {
    memcpy_async(dst, src, bytes, stream);
  }
  void fill_async(void* dst, std::uint8_t byte, std::size_t bytes, Stream stream) const override {
    memset_async(dst, byte, bytes, stream);
  }
  void synchronize(Stream stream) const override { stream_synchronize(stream); }

  Stream create_stream(int device) const override { return cuda::create_stream(device); }
  void destroy_stream(Stream stream) const override { cuda::destroy_stream(stream); }
  Event create_event(int device, bool timing) const override {
    return timing ? create_timing_event(device) : cuda::create_event(device);
  }
  void destroy_event(Event event) const override { cuda::destroy_event(event); }
  void record_event(Event event, Stream stream) const override { cuda::record_event(event, stream); }
  void stream_wait_event(Stream stream, Event event) const override {
    cuda::stream_wait_event(stream, event);
  }
  void event_synchronize(Event event) const override { cuda::event_synchronize(event); }
  float elapsed_ms(Event start, Event stop) const override { return cuda::elapsed_ms(start, stop); }

  detail::DeviceProfile profile(int device) const override {
    return {multiprocessor_count(device), detail::DeviceProfile::h200().work_items_per_processor};
  }

  detail::AttentionKernelTraits attention_kernel(const detail::AttentionProblem& pr,
                                                 int device) const override {
    const KernelTraits traits = select_kernel(pr, device);
    // The GPU runs a batch's items as one wave where they fit: a split beyond that
    // only adds merges (decode) or a thin last wave (prefill of equal tiles); skewed
    // lengths still get finer chunks (make_schedule).
    // A chunk's partial state (rows x head_dim floats, written and merged) should stay
    // small next to the KV it reads: chunks of at least 8 keys per row of the tile.
    // Decode tiles take at least 512 keys: half the items and partial states of the
    // 256-key one-wave split of a single 32k request, which measured 0.99 of its time
    // on the H200 (fp8 KV 0.96-0.98).
    const std::int64_t min_keys = traits.q_tile_rows <= 16 ? 512 : 8 * std::int64_t(traits.q_tile_rows);
    return {.key = traits.key,
            .q_tile_rows = traits.q_tile_rows,
            .work_items_per_processor = traits.work_items_per_processor,
            .max_item_warps = traits.max_item_warps,
            .split_waves = 1,
            .min_chunk_tokens = std::max<std::int64_t>(256, min_keys)};
  }
  detail::MlaKernelTraits mla_kernel(const detail::MLAProblem& pr, std::int64_t max_item_rows,
                                     int device) const override {
    const MlaKernelTraits traits = select_mla_kernel(pr, max_item_rows, device);
    // One wave of items at the full rate, as attention's.
    return {.q_tile_rows = traits.q_tile_rows,
            .work_items_per_processor = traits.work_items_per_processor,
            .split_waves = 1};
  }

  void run_attention(const detail::AttentionParams& p) const override { cuda::run_attention(p); }
  void run_mla(const detail::MLAParams& p) const override { cuda::run_mla(p); }
  void append_paged_kv_cache(const detail::AppendPagedKVParams& p) const override {
    cuda::append_paged_kv_cache(p);
  }
  void append_paged_mla_kv_cache(const detail::AppendPagedMLAParams& p) const override {
    cuda::append_paged_mla_kv_cache(p);
  }
  void get_batch_indices_positions(const detail::BatchIndicesPositionsParams& p) const override {
    cuda::get_batch_indices_positions(p);
  }
  void get_seq_lens(const detail::SeqLensParams& p) const override { cuda::get_seq_lens(p); }
  void packbits(const detail::PackBitsParams& p) const override { cuda::packbits(p); }
  void segment_packbits(const detail::SegmentPackBitsParams& p) const override { cuda::segment_packbits(p); }
  void merge_state(const detail::MergeStateParams& p) const override { cuda::merge_state(p); }
  void merge_states(const detail::MergeStatesParams& p) const override { cuda::merge_states(p); }
};

}  // namespace

const detail::Backend& backend() {
  static const CudaBackend instance;
  return instance;
}

}  // namespace kvinfer::cuda
