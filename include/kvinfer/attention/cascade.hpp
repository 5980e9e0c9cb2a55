// SPDX-License-Identifier: Apache-2.0
// Multi-level cascade attention (docs/semantics.md §1, §4): requests that share KV prefixes
// form a tree; each level holds one KV segment per subtree, attended once for all
// the query rows of that subtree, and the levels' states are merged exactly.
//
//   MultiLevelCascadeAttention w(2);
//   w.plan({.levels = {{.qo_indptr = {0, B}, .page_table = shared_prefix},
//                      {.qo_indptr = {0, 1, ..., B}, .page_table = per_request}},
//           .num_qo_heads = 32, .num_kv_heads = 8, .head_dim = 128, .page_size = 16});
//   w.run(q, cache, out);
#pragma once

#include <memory>
#include <vector>

#include "kvinfer/attention/options.hpp"
#include "kvinfer/attention/run_options.hpp"
#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/kv_layout.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer {

// One level: every level views the same ragged q/o and the same page pool.
struct CascadeLevel {
  TensorView qo_indptr;  // host int32 [subtrees + 1]: query rows of each subtree; ends at nnz_q
  PageTable page_table;  // one KV segment per subtree (indptr/last_page_len on the host)
};

struct CascadePlanArgs {
  std::vector<CascadeLevel> levels;  // levels[0] is the root (coarsest)
  std::int64_t num_qo_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t page_size = 0;
  // mask_mode none or causal; causal applies to the last level only. RoPE, ALiBi and
  // a window need per-level positions and are rejected.
  AttentionOptions options;
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  DType o_dtype = DType::kBF16;
  SplitOptions split;
};

class MultiLevelCascadeAttention {
 public:
  // capacities: empty, or one per level for CUDA-graph mode (max_qo_tokens of every
  // level is the number of query rows).
  explicit MultiLevelCascadeAttention(int num_levels, Device device = Device::cpu(),
                                      KVLayout kv_layout = KVLayout::kNHD, std::vector<Capacity> capacities = {});
  ~MultiLevelCascadeAttention();
  MultiLevelCascadeAttention(MultiLevelCascadeAttention&&) noexcept;
  MultiLevelCascadeAttention& operator=(MultiLevelCascadeAttention&&) noexcept;

  void plan(const CascadePlanArgs& args);
  // The caller's workspace buffers (see BatchPrefillWithPagedKVCache), cut into one
  // part per level by each plan(); takes effect at the next plan().
  void reset_workspace_buffer(const TensorView& float_workspace_buffer, const TensorView& int_workspace_buffer = {});
  // q [nnz_q, Hq, D], out [nnz_q, Hq, D]; options.lse receives the merged LSE.
  void run(const TensorView& q, const PagedKVCache& cache, const TensorView& out,
           const RunOptions& options = {}) const;

  // The first bad page id that this wrapper's kernels met on a GPU since plan() or the
  // last status(), which this clears (kvinfer/core/index_status.hpp). Waits for
  // `stream`. Always ok() on the CPU (it throws at run()) and in builds without device
  // index checks (KVINFER_DEVICE_INDEX_CHECKS), whose kernels record nothing.
  IndexStatus status(Stream stream = nullptr);

 private:
  void run_levels(const TensorView& q, const PagedKVCache& cache, const TensorView& out,
                  const RunOptions& options) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvinfer
