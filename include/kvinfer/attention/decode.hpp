// SPDX-License-Identifier: Apache-2.0
// Batch decode: one query row per request against a paged KV cache (docs/semantics.md §3-5).
//
//   BatchDecodeWithPagedKVCache w(Device::cpu());
//   w.plan({.page_table = table, .num_qo_heads = 32, .num_kv_heads = 8, .head_dim = 128,
//           .page_size = 16});
//   w.run(q, cache, out);
#pragma once

#include <memory>

#include "kvinfer/attention/options.hpp"
#include "kvinfer/attention/run_options.hpp"
#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/kv_layout.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer {

namespace detail {
class AttentionPlan;
}

struct DecodePlanArgs {
  PageTable page_table;  // indptr, last_page_len on the host; indices where run() reads them
  std::int64_t num_qo_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t page_size = 0;
  AttentionOptions options;  // mask_mode must be kNone (the query is the last token)
  // The query's position among each request's keys, as for the prefill wrappers: host
  // int32 [batch_size] or absent; the query is at kv_len - 1 + position_offsets[b] (for
  // the window, RoPE and ALiBi). Non-zero offsets run on the CPU backend only.
  TensorView position_offsets;
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  DType o_dtype = DType::kBF16;
  SplitOptions split;
};

class BatchDecodeWithPagedKVCache {
 public:
  explicit BatchDecodeWithPagedKVCache(Device device = Device::cpu(), KVLayout kv_layout = KVLayout::kNHD,
                                       std::optional<Capacity> capacity = std::nullopt);
  ~BatchDecodeWithPagedKVCache();
  BatchDecodeWithPagedKVCache(BatchDecodeWithPagedKVCache&&) noexcept;
  BatchDecodeWithPagedKVCache& operator=(BatchDecodeWithPagedKVCache&&) noexcept;

  WorkspaceSize workspace_size(const DecodePlanArgs& args) const;
  void plan(const DecodePlanArgs& args);
  // Uses the caller's workspace buffers from now on (FlashInfer's float_workspace_buffer
  // and int_workspace_buffer): contiguous, 16-byte aligned, on the wrapper's device,
  // of at least workspace_size()'s bytes (plan() throws naming the buffer and the bytes
  // it needs). One float buffer may serve every wrapper run on one stream; the int
  // buffer holds this wrapper's plan. An absent view returns to the wrapper's own.
  void reset_workspace_buffer(const TensorView& float_workspace_buffer, const TensorView& int_workspace_buffer = {});
  // q [batch_size, Hq, D]; out [batch_size, Hq, D]. Allocates nothing.
  void run(const TensorView& q, const PagedKVCache& cache, const TensorView& out,
           const RunOptions& options = {}) const;

  // The first bad page id that this wrapper's kernels met on a GPU since plan() or the
  // last status(), which this clears (kvinfer/core/index_status.hpp). Waits for
  // `stream`. Always ok() on the CPU (it throws at run()) and in builds without device
  // index checks (KVINFER_DEVICE_INDEX_CHECKS), whose kernels record nothing.
  IndexStatus status(Stream stream = nullptr);

 private:
  std::unique_ptr<detail::AttentionPlan> impl_;
};

// One query row: q [Hq, D], k/v [kv_len, Hk, D] (HND: [Hk, kv_len, D]), out [Hq, D];
// run.lse, if given, is float32 [Hq].
struct SingleDecodeArgs {
  AttentionOptions options;
  KVLayout kv_layout = KVLayout::kNHD;
};
void single_decode(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                   const SingleDecodeArgs& args = {}, const RunOptions& run = {});

}  // namespace kvinfer
