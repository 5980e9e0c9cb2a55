// SPDX-License-Identifier: Apache-2.0
// The backend registry: the one place that knows which backends this build has.
#include <string>

#include "backend/backend.hpp"
#include "cpu/backend.hpp"
#include "kvinfer/core/error.hpp"
#ifdef KVINFER_WITH_CUDA
#include "cuda/backend.hpp"
#endif

namespace kvinfer {
namespace detail {
namespace {

// The CUDA backend of a build without it: no devices, and every call an error that
// says how to get it. Public entry points check the device first
// (check_backend_built); these errors name the operation that reached further.
class MissingCudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda (not built)"; }
  int device_count() const override { return 0; }
  void* allocate(std::size_t, int) const override { fail("Tensor::empty"); }
  void deallocate(void*, int) const override {}
  void copy_async(void*, const void*, std::size_t, Stream) const override { fail("copy"); }
  void fill_async(void*, std::uint8_t, std::size_t, Stream) const override { fail("fill_bytes"); }
  void synchronize(Stream) const override { fail("synchronize"); }
  Stream create_stream(int) const override { fail("create_stream"); }
  void destroy_stream(Stream) const override {}
  Event create_event(int, bool) const override { fail("create_event"); }
  void destroy_event(Event) const override {}
  void record_event(Event, Stream) const override { fail("record_event"); }
  void stream_wait_event(Stream, Event) const override { fail("stream_wait_event"); }
  void event_synchronize(Event) const override { fail("event_synchronize"); }
  float elapsed_ms(Event, Event) const override { fail("elapsed_ms"); }
  DeviceProfile profile(int) const override { fail("attention"); }
  AttentionKernelTraits attention_kernel(const AttentionProblem&, int) const override { fail("attention"); }
  MlaKernelTraits mla_kernel(const MLAProblem&, std::int64_t, int) const override {
    fail("BatchMLAPagedAttention");
  }
  void run_attention(const AttentionParams&) const override { fail("attention"); }
  void run_mla(const MLAParams&) const override { fail("BatchMLAPagedAttention"); }
  void append_paged_kv_cache(const AppendPagedKVParams&) const override { fail("append_paged_kv_cache"); }
  void append_paged_mla_kv_cache(const AppendPagedMLAParams&) const override {
    fail("append_paged_mla_kv_cache");
  }
  void get_batch_indices_positions(const BatchIndicesPositionsParams&) const override {
    fail("get_batch_indices_positions");
  }
  void get_seq_lens(const SeqLensParams&) const override { fail("get_seq_lens"); }
  void packbits(const PackBitsParams&) const override { fail("packbits"); }
  void segment_packbits(const SegmentPackBitsParams&) const override { fail("segment_packbits"); }
  void merge_state(const MergeStateParams&) const override { fail("merge_state"); }
  void merge_states(const MergeStatesParams&) const override { fail("merge_states"); }

 private:
  [[noreturn]] static void fail(std::string_view op) {
    throw Error(op, "device", "cuda",
                "the CUDA backend is not built (configure with -DKVINFER_CUDA=ON on a machine with nvcc)");
  }
};

}  // namespace

const Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu::backend();
#ifdef KVINFER_WITH_CUDA
  return cuda::backend();
#else
  static const MissingCudaBackend missing;
  return missing;
#endif
}

}  // namespace detail

bool cuda_backend_built() {
#ifdef KVINFER_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
  return detail::backend_for(Device::cuda(0)).device_count();
}

}  // namespace kvinfer
