// SPDX-License-Identifier: Apache-2.0
// Batch prefill: ragged queries against ragged or paged keys/values (docs/semantics.md §3-5).
//
//   BatchPrefillWithPagedKVCache w(Device::cpu());
//   w.plan({.qo_indptr = qo_indptr, .page_table = table, .num_qo_heads = 32, .num_kv_heads = 8,
//           .head_dim = 128, .page_size = 16, .options = {.mask_mode = MaskMode::kCausal}});
//   w.run(q, cache, out, {.lse = lse});
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

struct RaggedPrefillPlanArgs {
  TensorView qo_indptr;  // host int32 [batch_size + 1]
  TensorView kv_indptr;  // host int32 [batch_size + 1], key rows of each request
  std::int64_t num_qo_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim_qk = 0;
  std::int64_t head_dim_vo = 0;  // 0: equal to head_dim_qk
  AttentionOptions options;
  // Custom mask (options.mask_mode == kCustom): bool [sum qo_len * kv_len] (packed in
  // plan), or uint8 already packed with little bit order, each request padded to a byte.
  TensorView custom_mask;
  // Where each request's query rows sit among its keys, for a shard of a longer
  // sequence (context parallelism): host int32 [batch_size], or absent (all 0). Row i
  // of request b is at position kv_len - qo_len + i + position_offsets[b] of the
  // request's keys (0: bottom-right), for the causal mask, the window, RoPE and ALiBi
  // (docs/semantics.md, "Position offsets"). Non-zero offsets run on the CPU backend;
  // the CUDA backend rejects them at plan().
  TensorView position_offsets;
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  DType o_dtype = DType::kBF16;
  SplitOptions split;
};

class BatchPrefillWithRaggedKVCache {
 public:
  explicit BatchPrefillWithRaggedKVCache(Device device = Device::cpu(), KVLayout kv_layout = KVLayout::kNHD,
                                         std::optional<Capacity> capacity = std::nullopt);
  ~BatchPrefillWithRaggedKVCache();
  BatchPrefillWithRaggedKVCache(BatchPrefillWithRaggedKVCache&&) noexcept;
  BatchPrefillWithRaggedKVCache& operator=(BatchPrefillWithRaggedKVCache&&) noexcept;

  WorkspaceSize workspace_size(const RaggedPrefillPlanArgs& args) const;
  void plan(const RaggedPrefillPlanArgs& args);
  // Uses the caller's workspace buffers from now on (FlashInfer's float_workspace_buffer
  // and int_workspace_buffer): contiguous, 16-byte aligned, on the wrapper's device,
  // of at least workspace_size()'s bytes (plan() throws naming the buffer and the bytes
  // it needs). One float buffer may serve every wrapper run on one stream; the int
  // buffer holds this wrapper's plan. An absent view returns to the wrapper's own.
  void reset_workspace_buffer(const TensorView& float_workspace_buffer, const TensorView& int_workspace_buffer = {});
  // q [nnz_q, Hq, Dqk]; k [nnz_kv, Hk, Dqk] / v [nnz_kv, Hk, Dvo] (HND: [Hk, nnz_kv, D]);
  // out [nnz_q, Hq, Dvo]. Allocates nothing.
  void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
           const RunOptions& options = {}) const;

  // The first bad page id that this wrapper's kernels met on a GPU since plan() or the
  // last status(), which this clears (kvinfer/core/index_status.hpp). Waits for
  // `stream`. Always ok() on the CPU (it throws at run()) and in builds without device
  // index checks (KVINFER_DEVICE_INDEX_CHECKS), whose kernels record nothing.
  IndexStatus status(Stream stream = nullptr);

 private:
  std::unique_ptr<detail::AttentionPlan> impl_;
};

struct PagedPrefillPlanArgs {
  TensorView qo_indptr;   // host int32 [batch_size + 1]
  PageTable page_table;   // indptr, last_page_len on the host; indices where run() reads them
  std::int64_t num_qo_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t page_size = 0;
  AttentionOptions options;
  TensorView custom_mask;  // as for the ragged wrapper
  TensorView position_offsets;  // as for the ragged wrapper
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  DType o_dtype = DType::kBF16;
  SplitOptions split;
};

class BatchPrefillWithPagedKVCache {
 public:
  explicit BatchPrefillWithPagedKVCache(Device device = Device::cpu(), KVLayout kv_layout = KVLayout::kNHD,
                                        std::optional<Capacity> capacity = std::nullopt);
  ~BatchPrefillWithPagedKVCache();
  BatchPrefillWithPagedKVCache(BatchPrefillWithPagedKVCache&&) noexcept;
  BatchPrefillWithPagedKVCache& operator=(BatchPrefillWithPagedKVCache&&) noexcept;

  WorkspaceSize workspace_size(const PagedPrefillPlanArgs& args) const;
  void plan(const PagedPrefillPlanArgs& args);
  // Uses the caller's workspace buffers from now on (FlashInfer's float_workspace_buffer
  // and int_workspace_buffer): contiguous, 16-byte aligned, on the wrapper's device,
  // of at least workspace_size()'s bytes (plan() throws naming the buffer and the bytes
  // it needs). One float buffer may serve every wrapper run on one stream; the int
  // buffer holds this wrapper's plan. An absent view returns to the wrapper's own.
  void reset_workspace_buffer(const TensorView& float_workspace_buffer, const TensorView& int_workspace_buffer = {});
  // q [nnz_q, Hq, D]; out [nnz_q, Hq, D]; cache in the wrapper's layout.
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

// One request with contiguous K/V: q [qo_len, Hq, Dqk], k [kv_len, Hk, Dqk],
// v [kv_len, Hk, Dvo] (HND: [Hk, kv_len, D]), out [qo_len, Hq, Dvo].
struct SinglePrefillArgs {
  AttentionOptions options;
  // bool [qo_len, kv_len] (row-major: it is read as the flat mask, without a copy),
  // bool [qo_len * kv_len], or those bits packed as uint8 (little bit order).
  TensorView custom_mask;
  KVLayout kv_layout = KVLayout::kNHD;
};
void single_prefill(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                    const SinglePrefillArgs& args = {}, const RunOptions& run = {});

}  // namespace kvinfer
