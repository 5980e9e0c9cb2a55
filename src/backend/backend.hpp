// SPDX-License-Identifier: Apache-2.0
// The one interface of a backend: memory and streams on its devices, what the
// planner needs to know of its processors and kernels, and the execution of
// checked calls. src/core and src/plan reach a backend only through it: the
// registry (registry.cpp, the one place that knows which backends are built) hands
// out the backend of a device. Arguments are validated by src/core before they
// reach a backend, which trusts them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/attention_params.hpp"
#include "core/mla_params.hpp"
#include "core/op_params.hpp"
#include "kvinfer/core/device.hpp"
#include "plan/device_profile.hpp"

namespace kvinfer::detail {

// What the planner must know of the kernel that will run an attention problem: how
// its work items are shaped and how many run at once. Chosen by the backend at
// plan time and kept in the plan.
struct AttentionKernelTraits {
  KernelKey key;                     // what run() launches
  std::int32_t q_tile_rows = 64;     // packed query rows per work item
  int work_items_per_processor = 1;  // resident CTAs per SM (CPU: 1 per thread)
  int max_item_warps = 1;            // warps one item's CTA may run (1: no item warps)
  // How the automatic split fills the device (ScheduleInput: split_waves,
  // min_chunk_tokens).
  std::int64_t split_waves = 4;
  std::int64_t min_chunk_tokens = 256;
};

// The same for MLA (no item warps).
struct MlaKernelTraits {
  KernelKey key;  // what run() launches
  std::int32_t q_tile_rows = 64;
  int work_items_per_processor = 1;
  std::int64_t split_waves = 4;
};

class Backend {
 public:
  using Event = void*;

  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual int device_count() const = 0;

  // Memory of `device` (the index is ignored on the CPU). Copies and fills run in
  // stream order and may return before they complete (synchronize waits).
  virtual void* allocate(std::size_t bytes, int device) const = 0;
  virtual void deallocate(void* ptr, int device) const = 0;
  virtual void copy_async(void* dst, const void* src, std::size_t bytes, Stream stream) const = 0;
  virtual void fill_async(void* dst, std::uint8_t byte, std::size_t bytes, Stream stream) const = 0;
  virtual void synchronize(Stream stream) const = 0;

  // Side streams and events (StreamFork, SpanTimer). A backend whose work runs in
  // the calling thread has none: create_stream returns null.
  virtual Stream create_stream(int device) const = 0;
  virtual void destroy_stream(Stream stream) const = 0;
  virtual Event create_event(int device, bool timing) const = 0;
  virtual void destroy_event(Event event) const = 0;
  virtual void record_event(Event event, Stream stream) const = 0;
  virtual void stream_wait_event(Stream stream, Event event) const = 0;
  virtual void event_synchronize(Event event) const = 0;
  virtual float elapsed_ms(Event start, Event stop) const = 0;

  // What the planner needs: the processors, and the kernel a problem runs on
  // (throws kvinfer::Error naming the build option when none is compiled in).
  virtual DeviceProfile profile(int device) const = 0;
  virtual AttentionKernelTraits attention_kernel(const AttentionProblem& problem, int device) const = 0;
  virtual MlaKernelTraits mla_kernel(const MLAProblem& problem, std::int64_t max_item_rows,
                                     int device) const = 0;

  // Execution of planned and checked calls, in stream order; allocates nothing.
  virtual void run_attention(const AttentionParams& p) const = 0;
  virtual void run_mla(const MLAParams& p) const = 0;
  virtual void append_paged_kv_cache(const AppendPagedKVParams& p) const = 0;
  virtual void append_paged_mla_kv_cache(const AppendPagedMLAParams& p) const = 0;
  virtual void get_batch_indices_positions(const BatchIndicesPositionsParams& p) const = 0;
  virtual void get_seq_lens(const SeqLensParams& p) const = 0;
  virtual void packbits(const PackBitsParams& p) const = 0;
  virtual void segment_packbits(const SegmentPackBitsParams& p) const = 0;
  virtual void merge_state(const MergeStateParams& p) const = 0;
  virtual void merge_states(const MergeStatesParams& p) const = 0;
};

// The backend of a device's kind. For a CUDA device in a build without the CUDA
// backend, one whose every call throws kvinfer::Error naming `device` and the
// CMake option that adds it (device_count() is 0).
const Backend& backend_for(Device device);

}  // namespace kvinfer::detail
