// SPDX-License-Identifier: Apache-2.0
// Batch multi-head latent attention (MLA, DeepSeek) over a paged MLA cache (docs/semantics.md §1, §4):
// every head attends the one shared latent KV (ckv + rotary kpe) of its request.
//
//   BatchMLAPagedAttention w(Device::cpu());
//   w.plan({.qo_indptr = qo_indptr, .kv_indptr = kv_indptr, .kv_indices = kv_indices,
//           .kv_len = kv_len, .num_heads = 128, .page_size = 64, .causal = true,
//           .sm_scale = 1.0f / std::sqrt(192.0f)});
//   w.run(q_nope, q_pe, MLACache::combined(cache), out, {.lse = lse});
#pragma once

#include <memory>
#include <optional>

#include "kvinfer/attention/run_options.hpp"
#include "kvinfer/core/index_status.hpp"
#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/mla_cache.hpp"

namespace kvinfer {

namespace detail {
class MLAPlan;
}

struct MLAPlanArgs {
  TensorView qo_indptr;   // host int32 [batch_size + 1], query rows of each request
  TensorView kv_indptr;   // host int32 [batch_size + 1], PAGES of each request
  TensorView kv_indices;  // int32 [>= kv_indptr[batch_size]], where run() reads it (the wrapper's device)
  TensorView kv_len;      // host int32 [batch_size], keys (tokens) of each request
  std::int64_t num_heads = 0;
  std::int64_t head_dim_ckv = kMlaHeadDimCkv;  // 512
  std::int64_t head_dim_kpe = kMlaHeadDimKpe;  // 64, or 0 (no rotary part)
  std::int64_t page_size = 0;
  bool causal = false;  // bottom-right aligned
  // Required, no default: MLA absorbs the up-projections, so 1/sqrt(head_dim) of the
  // cache (576) is not the model's scale (DeepSeek uses 1/sqrt(128 + 64)).
  std::optional<float> sm_scale;
  DType q_dtype = DType::kBF16;   // float16 or bfloat16
  DType kv_dtype = DType::kBF16;  // float16, bfloat16, float8_e4m3 or float8_e5m2
  std::optional<DType> o_dtype;   // default: q_dtype
  SplitOptions split;
};

struct MLARunOptions {
  TensorView lse;           // optional out: float32 [nnz_q, num_heads]
  bool lse_base_e = false;  // natural-log LSE instead of base 2
  // fp8 dequantisation: logits (q_nope·ckv * ckv_scale + q_pe·kpe * kpe_scale) * sm_scale,
  // value ckv * ckv_scale.
  float ckv_scale = 1.0f;
  float kpe_scale = 1.0f;
  Stream stream = nullptr;
  // The checked mode of kv_indices on a GPU: run() waits for its kernels, reads the
  // device status (kvinfer/core/index_status.hpp) and throws kvinfer::Error for the
  // first bad page id they met. Unset: on when KVINFER_CHECK_INDICES=1.
  std::optional<bool> check_indices;
};

class BatchMLAPagedAttention {
 public:
  explicit BatchMLAPagedAttention(Device device = Device::cpu(),
                                  std::optional<Capacity> capacity = std::nullopt);
  ~BatchMLAPagedAttention();
  BatchMLAPagedAttention(BatchMLAPagedAttention&&) noexcept;
  BatchMLAPagedAttention& operator=(BatchMLAPagedAttention&&) noexcept;

  WorkspaceSize workspace_size(const MLAPlanArgs& args) const;
  void plan(const MLAPlanArgs& args);
  // Uses the caller's workspace buffers from now on (FlashInfer's float_workspace_buffer
  // and int_workspace_buffer): contiguous, 16-byte aligned, on the wrapper's device,
  // of at least workspace_size()'s bytes (plan() throws naming the buffer and the bytes
  // it needs). One float buffer may serve every wrapper run on one stream; the int
  // buffer holds this wrapper's plan. An absent view returns to the wrapper's own.
  void reset_workspace_buffer(const TensorView& float_workspace_buffer, const TensorView& int_workspace_buffer = {});
  // q_nope [nnz_q, num_heads, head_dim_ckv]; q_pe [nnz_q, num_heads, head_dim_kpe], absent
  // when head_dim_kpe == 0; out [nnz_q, num_heads, head_dim_ckv]. Allocates nothing.
  void run(const TensorView& q_nope, const TensorView& q_pe, const MLACache& cache, const TensorView& out,
           const MLARunOptions& options = {}) const;

  // The first bad value that this wrapper's kernels met in a device-resident index
  // array (kvinfer/core/index_status.hpp) since plan() or the last status(), which
  // this clears. Waits for `stream`. On the CPU always ok(): it throws at run().
  IndexStatus status(Stream stream = nullptr);

 private:
  std::unique_ptr<detail::MLAPlan> impl_;
};

}  // namespace kvinfer
