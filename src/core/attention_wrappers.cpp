// SPDX-License-Identifier: Apache-2.0
// The public attention wrappers: each gathers its plan arguments into a
// PlanRequest (checking the host index arrays) and forwards to AttentionPlan.
#include <fmt/format.h>

#include <limits>

#include "core/attention_plan.hpp"
#include "core/check.hpp"
#include "core/page_table.hpp"
#include "core/plan_checks.hpp"
#include "kvinfer/attention/decode.hpp"
#include "kvinfer/attention/prefill.hpp"
#include "kvinfer/layout/ragged.hpp"

namespace kvinfer {
namespace {

using detail::AttentionPlan;
using detail::KVStorage;
using detail::PlanRequest;

constexpr std::string_view kRaggedOp = "BatchPrefillWithRaggedKVCache";
constexpr std::string_view kPagedOp = "BatchPrefillWithPagedKVCache";
constexpr std::string_view kDecodeOp = "BatchDecodeWithPagedKVCache";

// Page table of a paged wrapper: lengths from the host arrays; indices stay where
// run() reads them (the wrapper's device) and are checked for shape only.
void fill_paged(PlanRequest& req, const PageTable& table, std::int64_t page_size, Device device) {
  const std::string_view op = req.op;
  detail::check_index_array(op, "kv_indptr", table.indptr);
  detail::require(table.indptr.size(0) >= 1, op, "kv_indptr.shape[0]", "0", "an indptr has batch_size + 1 >= 1 entries");
  const std::int64_t batch = table.indptr.size(0) - 1;
  detail::check_host_index_array(op, "kv_indptr", table.indptr, batch + 1);
  detail::check_host_index_array(op, "kv_last_page_len", table.last_page_len, batch);
  detail::check_index_array(op, "kv_indices", table.indices);
  detail::check_device(op, "kv_indices", table.indices, device);
  detail::require_v(page_size >= 1 && page_size <= std::numeric_limits<std::int32_t>::max(), op, "page_size",
                    page_size, "must be in [1, 2^31 - 1]");
  const auto* indptr = table.indptr.data_as<const std::int32_t>();
  req.kv_lens = detail::kv_lens_from_last_page_len(op, indptr, table.last_page_len.data_as<const std::int32_t>(),
                                                   batch, page_size);
  detail::require_v(table.indices.size(0) >= indptr[batch], op, "kv_indices.shape[0]", table.indices.size(0),
                    fmt::format("must be >= kv_indptr[batch_size] = {} (one page id per page slot)", indptr[batch]));
  req.kv_begin.assign(indptr, indptr + batch);
  req.nnz_kv = indptr[batch];
  req.kv_indices = table.indices;
  req.page_size = page_size;
  req.storage = KVStorage::kPaged;
}

// The fields every wrapper's plan arguments share (heads, dims, dtypes, options,
// split); each PlanArgs names them alike.
template <class Args>
void fill_shape(PlanRequest& req, const Args& a, std::int64_t head_dim_qk, std::int64_t head_dim_vo) {
  req.num_qo_heads = a.num_qo_heads;
  req.num_kv_heads = a.num_kv_heads;
  req.head_dim_qk = head_dim_qk;
  req.head_dim_vo = head_dim_vo;
  req.q_dtype = a.q_dtype;
  req.kv_dtype = a.kv_dtype;
  req.o_dtype = a.o_dtype;
  req.options = a.options;
  req.split = a.split;
}

// The optional position offsets of a plan's requests (host int32 [batch_size]).
void fill_position_offsets(PlanRequest& req, const TensorView& offsets) {
  if (!offsets.defined()) return;
  detail::check_host_index_array(req.op, "position_offsets", offsets, std::int64_t(req.qo_lens.size()));
  const auto* o = offsets.data_as<const std::int32_t>();
  req.position_offsets.assign(o, o + req.qo_lens.size());
}

// `op` names the caller in every error of the plan (the wrapper, or single_prefill).
PlanRequest ragged_request(const RaggedPrefillPlanArgs& a, std::string_view op = kRaggedOp) {
  PlanRequest req;
  req.op = op;
  req.qo_lens = detail::host_lengths(op, "qo_indptr", a.qo_indptr, -1);
  const auto batch = std::int64_t(req.qo_lens.size());
  req.kv_lens = detail::host_lengths(op, "kv_indptr", a.kv_indptr, batch);
  const auto* kv_indptr = a.kv_indptr.data_as<const std::int32_t>();
  req.kv_begin.assign(kv_indptr, kv_indptr + batch);
  req.nnz_kv = kv_indptr[batch];
  fill_shape(req, a, a.head_dim_qk, a.head_dim_vo == 0 ? a.head_dim_qk : a.head_dim_vo);
  req.custom_mask = a.custom_mask;
  fill_position_offsets(req, a.position_offsets);
  return req;
}

}  // namespace

namespace detail {
PlanRequest paged_prefill_request(const PagedPrefillPlanArgs& a, Device device) {
  PlanRequest req;
  req.op = kPagedOp;
  req.qo_lens = detail::host_lengths(kPagedOp, "qo_indptr", a.qo_indptr, -1);
  fill_paged(req, a.page_table, a.page_size, device);
  detail::require_v(a.page_table.batch_size() == std::int64_t(req.qo_lens.size()), kPagedOp,
                    "kv_indptr.shape[0]", a.page_table.indptr.size(0),
                    fmt::format("must equal qo_indptr.shape[0] ({})", req.qo_lens.size() + 1));
  fill_shape(req, a, a.head_dim, a.head_dim);
  req.custom_mask = a.custom_mask;
  fill_position_offsets(req, a.position_offsets);
  return req;
}
}  // namespace detail

namespace {

PlanRequest decode_request(const DecodePlanArgs& a, Device device) {
  PlanRequest req;
  req.op = kDecodeOp;
  fill_paged(req, a.page_table, a.page_size, device);
  req.qo_lens.assign(req.kv_lens.size(), 1);
  req.max_qo_len = 1;
  detail::require(a.options.mask_mode == MaskMode::kNone, kDecodeOp, "options.mask_mode",
                  a.options.mask_mode == MaskMode::kCausal ? "causal" : "custom",
                  "decode attends the last token to every key: mask_mode must be none");
  fill_shape(req, a, a.head_dim, a.head_dim);
  fill_position_offsets(req, a.position_offsets);
  return req;
}

}  // namespace

// ---------------------------------------------------------------- ragged prefill
BatchPrefillWithRaggedKVCache::BatchPrefillWithRaggedKVCache(Device device, KVLayout kv_layout,
                                                             std::optional<Capacity> capacity)
    : impl_(std::make_unique<AttentionPlan>(kRaggedOp, device, kv_layout, capacity)) {}
BatchPrefillWithRaggedKVCache::~BatchPrefillWithRaggedKVCache() = default;
BatchPrefillWithRaggedKVCache::BatchPrefillWithRaggedKVCache(BatchPrefillWithRaggedKVCache&&) noexcept = default;
BatchPrefillWithRaggedKVCache& BatchPrefillWithRaggedKVCache::operator=(BatchPrefillWithRaggedKVCache&&) noexcept =
    default;

WorkspaceSize BatchPrefillWithRaggedKVCache::workspace_size(const RaggedPrefillPlanArgs& args) const {
  return impl_->workspace_size(ragged_request(args));
}
void BatchPrefillWithRaggedKVCache::reset_workspace_buffer(const TensorView& float_workspace_buffer,
                                    const TensorView& int_workspace_buffer) {
  impl_->reset_workspace_buffer(kRaggedOp, float_workspace_buffer, int_workspace_buffer);
}
void BatchPrefillWithRaggedKVCache::plan(const RaggedPrefillPlanArgs& args) { impl_->plan(ragged_request(args)); }
void BatchPrefillWithRaggedKVCache::run(const TensorView& q, const TensorView& k, const TensorView& v,
                                        const TensorView& out, const RunOptions& options) const {
  impl_->run(kRaggedOp, q, k, v, out, options);
}

// ---------------------------------------------------------------- paged prefill
BatchPrefillWithPagedKVCache::BatchPrefillWithPagedKVCache(Device device, KVLayout kv_layout,
                                                           std::optional<Capacity> capacity)
    : impl_(std::make_unique<AttentionPlan>(kPagedOp, device, kv_layout, capacity)) {}
BatchPrefillWithPagedKVCache::~BatchPrefillWithPagedKVCache() = default;
BatchPrefillWithPagedKVCache::BatchPrefillWithPagedKVCache(BatchPrefillWithPagedKVCache&&) noexcept = default;
BatchPrefillWithPagedKVCache& BatchPrefillWithPagedKVCache::operator=(BatchPrefillWithPagedKVCache&&) noexcept =
    default;

WorkspaceSize BatchPrefillWithPagedKVCache::workspace_size(const PagedPrefillPlanArgs& args) const {
  return impl_->workspace_size(detail::paged_prefill_request(args, impl_->device()));
}
void BatchPrefillWithPagedKVCache::reset_workspace_buffer(const TensorView& float_workspace_buffer,
                                    const TensorView& int_workspace_buffer) {
  impl_->reset_workspace_buffer(kPagedOp, float_workspace_buffer, int_workspace_buffer);
}
void BatchPrefillWithPagedKVCache::plan(const PagedPrefillPlanArgs& args) {
  impl_->plan(detail::paged_prefill_request(args, impl_->device()));
}
void BatchPrefillWithPagedKVCache::run(const TensorView& q, const PagedKVCache& cache, const TensorView& out,
                                       const RunOptions& options) const {
  detail::require(cache.layout == impl_->layout(), kPagedOp, "paged_kv_cache.layout", kv_layout_name(cache.layout),
                  detail::later("must be the wrapper's layout ({})", kv_layout_name(impl_->layout())));
  impl_->run(kPagedOp, q, cache.k, cache.v, out, options);
}

// ---------------------------------------------------------------- decode
BatchDecodeWithPagedKVCache::BatchDecodeWithPagedKVCache(Device device, KVLayout kv_layout,
                                                         std::optional<Capacity> capacity)
    : impl_(std::make_unique<AttentionPlan>(kDecodeOp, device, kv_layout, capacity)) {}
BatchDecodeWithPagedKVCache::~BatchDecodeWithPagedKVCache() = default;
BatchDecodeWithPagedKVCache::BatchDecodeWithPagedKVCache(BatchDecodeWithPagedKVCache&&) noexcept = default;
BatchDecodeWithPagedKVCache& BatchDecodeWithPagedKVCache::operator=(BatchDecodeWithPagedKVCache&&) noexcept = default;

WorkspaceSize BatchDecodeWithPagedKVCache::workspace_size(const DecodePlanArgs& args) const {
  return impl_->workspace_size(decode_request(args, impl_->device()));
}
void BatchDecodeWithPagedKVCache::reset_workspace_buffer(const TensorView& float_workspace_buffer,
                                    const TensorView& int_workspace_buffer) {
  impl_->reset_workspace_buffer(kDecodeOp, float_workspace_buffer, int_workspace_buffer);
}
void BatchDecodeWithPagedKVCache::plan(const DecodePlanArgs& args) {
  impl_->plan(decode_request(args, impl_->device()));
}
void BatchDecodeWithPagedKVCache::run(const TensorView& q, const PagedKVCache& cache, const TensorView& out,
                                      const RunOptions& options) const {
  detail::require(cache.layout == impl_->layout(), kDecodeOp, "paged_kv_cache.layout", kv_layout_name(cache.layout),
                  detail::later("must be the wrapper's layout ({})", kv_layout_name(impl_->layout())));
  impl_->run(kDecodeOp, q, cache.k, cache.v, out, options);
}

// ---------------------------------------------------------------- single request
namespace {

// single_prefill's custom mask as the ragged plan takes it (one request: a flat bool
// [qo_len * kv_len] or the packed bytes). A 2-D bool [qo_len, kv_len] mask is the
// same bytes when row-major, so it is flattened as a view (no copy); a strided one
// would need a gather that the caller can do better (and see), so it is refused.
TensorView flat_single_mask(std::string_view op, const TensorView& m, std::int64_t qo_len, std::int64_t kv_len) {
  if (!m.defined() || m.rank() != 2 || m.dtype() != DType::kBool) return m;  // the plan checks the rest
  detail::require(m.size(0) == qo_len && m.size(1) == kv_len, op, "custom_mask.shape", m.shape_string(),
                  detail::later("a 2-D mask must be [qo_len, kv_len] = [{}, {}]", qo_len, kv_len));
  detail::require(m.is_contiguous(), op, "custom_mask", m.describe(),
                  "a 2-D bool mask must be contiguous (row-major) to be read as the flat mask; pass a "
                  "contiguous copy or the flat [qo_len * kv_len] form");
  const std::int64_t n = qo_len * kv_len;
  if (!m.has_extent()) return TensorView(m.data(), DType::kBool, {n}, m.device());
  // Keep the bounds the caller's view carries (the flat view covers the same bytes).
  const auto offset = static_cast<const std::byte*>(m.data()) - static_cast<const std::byte*>(m.extent_begin());
  return TensorView(m.data(), std::size_t(m.extent_bytes() - offset), DType::kBool, {n}, m.device());
}

// single_prefill and single_decode: one request's ragged plan, made and run here. The
// plan carries the caller's name (`op`), so that every error names the function that
// was called; the shapes the plan would check against its own arguments (the indptr
// built here) are checked first against the caller's tensors, which are what the
// caller can fix.
void single_prefill_as(std::string_view op, const TensorView& q, const TensorView& k, const TensorView& v,
                       const TensorView& out, const SinglePrefillArgs& args, const RunOptions& run) {
  detail::check_rank(op, "q", q, 3);
  detail::check_rank(op, "k", k, 3);
  detail::check_rank(op, "v", v, 3);
  const bool nhd = args.kv_layout == KVLayout::kNHD;
  const int len_dim = nhd ? 0 : 1, head_dim = nhd ? 1 : 0;
  const std::int64_t qo_len = q.size(0), kv_len = k.size(len_dim);
  detail::require_v(qo_len <= std::numeric_limits<std::int32_t>::max() && kv_len <= std::numeric_limits<std::int32_t>::max(),
                    op, "k.shape", k.shape_string(), "lengths must fit in int32");
  detail::check_size(op, "v", v, len_dim, kv_len, "kv_len, as in k");
  detail::check_size(op, "v", v, head_dim, k.size(head_dim), "num_kv_heads, as in k");
  detail::check_rank(op, "out", out, 3);
  detail::check_size(op, "out", out, 0, qo_len, "qo_len = q.shape[0]");
  detail::check_size(op, "out", out, 1, q.size(1), "num_qo_heads = q.shape[1]");
  detail::check_size(op, "out", out, 2, v.size(2), "head_dim_vo = v.shape[2]");
  if (run.lse.defined()) {
    detail::check_rank(op, "lse", run.lse, 2);
    detail::check_size(op, "lse", run.lse, 0, qo_len, "qo_len = q.shape[0]");
    detail::check_size(op, "lse", run.lse, 1, q.size(1), "num_qo_heads = q.shape[1]");
  }
  std::int32_t qo_indptr[2] = {0, std::int32_t(qo_len)}, kv_indptr[2] = {0, std::int32_t(kv_len)};
  const TensorView mask = flat_single_mask(op, args.custom_mask, qo_len, kv_len);
  AttentionPlan plan(op, q.device(), args.kv_layout, std::nullopt);
  plan.plan(ragged_request({.qo_indptr = TensorView(qo_indptr, DType::kI32, {2}),
                            .kv_indptr = TensorView(kv_indptr, DType::kI32, {2}),
                            .num_qo_heads = q.size(1),
                            .num_kv_heads = k.size(head_dim),
                            .head_dim_qk = q.size(2),
                            .head_dim_vo = v.size(2),
                            .options = args.options,
                            .custom_mask = mask,
                            .q_dtype = q.dtype(),
                            .kv_dtype = k.dtype(),
                            .o_dtype = out.dtype()},
                           op));
  plan.run(op, q, k, v, out, run);
}

}  // namespace

void single_prefill(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                    const SinglePrefillArgs& args, const RunOptions& run) {
  single_prefill_as("single_prefill", q, k, v, out, args, run);
}

void single_decode(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                   const SingleDecodeArgs& args, const RunOptions& run) {
  constexpr std::string_view op = "single_decode";
  detail::check_rank(op, "q", q, 2);
  detail::check_rank(op, "v", v, 3);
  detail::check_rank(op, "out", out, 2);
  // Checked here on the 2-D tensors: once unsqueezed, a dimension's index would be off by one.
  detail::check_size(op, "out", out, 0, q.size(0), "num_qo_heads = q.shape[0]");
  detail::check_size(op, "out", out, 1, v.size(2), "head_dim_vo = v.shape[2]");
  detail::require(args.options.mask_mode == MaskMode::kNone, op, "options.mask_mode",
                  args.options.mask_mode == MaskMode::kCausal ? "causal" : "custom",
                  "decode attends the last token to every key: mask_mode must be none");
  RunOptions r = run;
  if (run.lse.defined()) {
    detail::check_rank(op, "lse", run.lse, 1);
    detail::check_size(op, "lse", run.lse, 0, q.size(0), "num_qo_heads = q.shape[0]");
    r.lse = run.lse.unsqueeze(0);
  }
  single_prefill_as(op, q.unsqueeze(0), k, v, out.unsqueeze(0), {.options = args.options, .kv_layout = args.kv_layout},
                    r);
}

IndexStatus BatchPrefillWithRaggedKVCache::status(Stream stream) {
  return impl_->status(stream);
}

IndexStatus BatchPrefillWithPagedKVCache::status(Stream stream) {
  return impl_->status(stream);
}

IndexStatus BatchDecodeWithPagedKVCache::status(Stream stream) {
  return impl_->status(stream);
}

}  // namespace kvinfer
