// SPDX-License-Identifier: Apache-2.0
// The CPU backend behind the one backend interface (src/backend/backend.hpp): its
// class, whose execution methods are defined beside the kernels they run
// (attention.cpp, mla.cpp, page.cpp, packbits.cpp, merge.cpp). Included by
// the registry and by those files.
#pragma once

#include "backend/backend.hpp"

namespace kvinfer::cpu {

class CpuBackend final : public detail::Backend {
 public:
  std::string_view name() const override;
  int device_count() const override;

  void* allocate(std::size_t bytes, int device) const override;
  void deallocate(void* ptr, int device) const override;
  void copy_async(void* dst, const void* src, std::size_t bytes, Stream stream) const override;
  void fill_async(void* dst, std::uint8_t byte, std::size_t bytes, Stream stream) const override;
  void synchronize(Stream stream) const override;

  Stream create_stream(int device) const override;
  void destroy_stream(Stream stream) const override;
  Event create_event(int device, bool timing) const override;
  void destroy_event(Event event) const override;
  void record_event(Event event, Stream stream) const override;
  void stream_wait_event(Stream stream, Event event) const override;
  void event_synchronize(Event event) const override;
  float elapsed_ms(Event start, Event stop) const override;

  detail::DeviceProfile profile(int device) const override;
  detail::AttentionKernelTraits attention_kernel(const detail::AttentionProblem& problem,
                                                 int device) const override;
  detail::MlaKernelTraits mla_kernel(const detail::MLAProblem& problem, std::int64_t max_item_rows,
                                     int device) const override;

  void run_attention(const detail::AttentionParams& p) const override;
  void run_mla(const detail::MLAParams& p) const override;
  void append_paged_kv_cache(const detail::AppendPagedKVParams& p) const override;
  void append_paged_mla_kv_cache(const detail::AppendPagedMLAParams& p) const override;
  void get_batch_indices_positions(const detail::BatchIndicesPositionsParams& p) const override;
  void get_seq_lens(const detail::SeqLensParams& p) const override;
  void packbits(const detail::PackBitsParams& p) const override;
  void segment_packbits(const detail::SegmentPackBitsParams& p) const override;
  void merge_state(const detail::MergeStateParams& p) const override;
  void merge_states(const detail::MergeStatesParams& p) const override;
};

const detail::Backend& backend();

// Scratch bytes a thread needs to run an attention or MLA plan's items of
// q_tile_rows rows (attention.cpp, mla.cpp): reserved when the kernel is chosen at
// plan time, so that run() allocates nothing.
std::size_t attention_scratch_bytes(const detail::AttentionProblem& problem, std::int64_t q_tile_rows);
std::size_t mla_scratch_bytes(const detail::MLAProblem& problem, std::int64_t q_tile_rows);

}  // namespace kvinfer::cpu
