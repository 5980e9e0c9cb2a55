// SPDX-License-Identifier: Apache-2.0
// BatchMLAPagedAttention: validation of plan and run arguments, the schedule, and
// the dispatch to the backend of the wrapper's device.
#include "core/mla_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/backend.hpp"
#include "core/check.hpp"
#include "core/device_status_host.hpp"
#include "core/plan_checks.hpp"

namespace kvinfer::detail {
namespace {

constexpr std::string_view kOp = "BatchMLAPagedAttention";
// Packed rows (tokens x heads) per work item: the q tile of FlashInfer's MLA kernel
// (64 rows per CTA), which also keeps a CPU item's query and accumulator tiles (64 x
// 576 and 64 x 512 floats) inside L2. The GPU kernel takes at most this many, fewer
// where the requests' rows are fewer.
constexpr std::int32_t kQTileRows = 64;

}  // namespace

MLAPlan::MLAPlan(Device device, std::optional<Capacity> capacity)
    : device_(device),
      capacity_(capacity),
      profile_(DeviceProfile::cpu(1)),
      workspace_(device, capacity.has_value()) {
  check_wrapper_device(kOp, device);
  if (capacity) check_capacity(kOp, *capacity);
  backend_ = &backend_for(device);
  profile_ = backend_->profile(device.index);
}

MLAPlan::Checked MLAPlan::check_plan(const MLAPlanArgs& a) const {
  Checked c;
  MLAProblem& pr = c.problem;

  require_v(a.num_heads > 0 && a.num_heads <= kMaxHeads, kOp, "num_heads", a.num_heads,
            fmt::format("must be in [1, {}]", kMaxHeads));
  require_v(a.head_dim_ckv == kMlaHeadDimCkv, kOp, "head_dim_ckv", a.head_dim_ckv,
            fmt::format("must be {} (the compressed latent width of DeepSeek MLA, the only one supported)",
                        kMlaHeadDimCkv));
  require_v(a.head_dim_kpe == kMlaHeadDimKpe || a.head_dim_kpe == 0, kOp, "head_dim_kpe", a.head_dim_kpe,
            fmt::format("must be {} or 0 (no rotary part)", kMlaHeadDimKpe));
  require_v(a.page_size >= 1 && a.page_size <= std::numeric_limits<std::int32_t>::max(), kOp, "page_size",
            a.page_size, "must be in [1, 2^31 - 1]");
  require(
      a.sm_scale.has_value(), kOp, "sm_scale", "(absent)",
      "MLA needs an explicit sm_scale (the model's 1/sqrt(head_dim) before absorption, e.g. 1/sqrt(192))");
  check_finite(kOp, "sm_scale", *a.sm_scale, true, "must be finite and positive");
  require(is_half(a.q_dtype), kOp, "q_dtype", dtype_name(a.q_dtype), "must be float16 or bfloat16");
  require(is_half(a.kv_dtype) || is_fp8(a.kv_dtype), kOp, "kv_dtype", dtype_name(a.kv_dtype),
          "must be float16, bfloat16, float8_e4m3 or float8_e5m2");
  const DType o_dtype = a.o_dtype.value_or(a.q_dtype);
  require(is_half(o_dtype), kOp, "o_dtype", dtype_name(o_dtype), "must be float16 or bfloat16");
  require_v(a.split.fixed_split_size == -1 || a.split.fixed_split_size > 0, kOp, "split.fixed_split_size",
            a.split.fixed_split_size, "must be -1 (automatic) or positive");

  // Lengths: query rows from qo_indptr, pages from kv_indptr, keys from kv_len.
  c.qo_lens = host_lengths(kOp, "qo_indptr", a.qo_indptr, -1);
  const auto batch = std::int64_t(c.qo_lens.size());
  const std::vector<std::int32_t> pages = host_lengths(kOp, "kv_indptr", a.kv_indptr, batch);
  check_host_index_array(kOp, "kv_len", a.kv_len, batch);
  const auto* kv_indptr = a.kv_indptr.data_as<const std::int32_t>();
  const auto* kv_len = a.kv_len.data_as<const std::int32_t>();
  for (std::int64_t i = 0; i < batch; ++i) {
    const std::int64_t np = pages[std::size_t(i)], len = kv_len[i];
    if (np == 0) {
      if (len != 0) {
        fail(kOp, fmt::format("kv_len[{}]", i), std::to_string(len),
             "must be 0 for a request without pages (kv_indptr[i + 1] == kv_indptr[i])");
      }
      continue;
    }
    const std::int64_t lo = (np - 1) * a.page_size, hi = np * a.page_size;
    require_v(
        len > lo && len <= hi, kOp, fmt::format("kv_len[{}]", i), len,
        fmt::format("must be in ({}, {}] for its {} pages of page_size {}: (pages - 1) * page_size < kv_len "
                    "<= pages * page_size",
                    lo, hi, np, a.page_size));
  }
  c.kv_lens.assign(kv_len, kv_len + batch);
  c.kv_begin.assign(kv_indptr, kv_indptr + batch);

  // The page table stays where run() reads it: checked for shape and device here,
  // for contents at run (SPEC §5).
  check_index_array(kOp, "kv_indices", a.kv_indices);
  check_device(kOp, "kv_indices", a.kv_indices, device_);
  require_v(
      a.kv_indices.size(0) >= kv_indptr[batch], kOp, "kv_indices.shape[0]", a.kv_indices.size(0),
      fmt::format("must be >= kv_indptr[batch_size] = {} (one page id per page slot)", kv_indptr[batch]));

  pr.batch_size = batch;
  pr.nnz_q = std::accumulate(c.qo_lens.begin(), c.qo_lens.end(), std::int64_t(0));
  pr.nnz_kv = kv_indptr[batch];
  pr.num_heads = a.num_heads;
  pr.head_dim_ckv = a.head_dim_ckv;
  pr.head_dim_kpe = a.head_dim_kpe;
  pr.page_size = a.page_size;
  pr.causal = a.causal;
  pr.max_qo_len = c.qo_lens.empty() ? 0 : *std::max_element(c.qo_lens.begin(), c.qo_lens.end());
  pr.sm_scale = *a.sm_scale;
  pr.q_dtype = a.q_dtype;
  pr.kv_dtype = a.kv_dtype;
  pr.o_dtype = o_dtype;

  // The lengths are checked against the capacity by make_schedule; the kernel is
  // chosen for the capacity's rows, so that every re-plan keeps it.
  if (capacity_) pr.max_qo_len = capacity_->max_qo_tokens;
  // A request's packed rows (tokens x heads) are int32 rows of its work items.
  require_v(pr.max_qo_len * pr.num_heads <= std::numeric_limits<std::int32_t>::max(), kOp,
            capacity_ ? "capacity.max_qo_tokens" : "qo_indptr", pr.max_qo_len,
            later("a request's query rows times num_heads ({}) must fit in int32", pr.num_heads));
  return c;
}

Schedule MLAPlan::make_plan_schedule(const Checked& c, const SplitOptions& split, KernelKey* kernel_out) const {
  const MLAProblem& pr = c.problem;
  ScheduleInput in;
  in.op = kOp;
  in.qo_lens = c.qo_lens;
  in.kv_begin = c.kv_begin;
  in.nnz_kv = pr.nnz_kv;
  in.kv_lens = c.kv_lens;
  // Every head reads the same latent KV: one KV head whose group is all heads, so a
  // work item's key block is loaded once for num_heads query rows of a token.
  in.num_qo_heads = pr.num_heads;
  in.num_kv_heads = 1;
  in.head_dim_vo = pr.head_dim_ckv;
  in.page_size = pr.page_size;
  in.window_left = -1;
  // The GPU kernel's items hold 16, 32 or 64 rows: the fewest that hold a request's
  // rows (decode with 16 heads: 16), so no CTA computes empty row blocks.
  const std::int64_t max_item_rows = std::min<std::int64_t>(kQTileRows, pr.max_qo_len * pr.num_heads);
  const MlaKernelTraits traits = backend_->mla_kernel(pr, max_item_rows, device_.index);
  if (kernel_out) *kernel_out = traits.key;
  in.q_tile_rows = traits.q_tile_rows;
  DeviceProfile profile = profile_;
  profile.work_items_per_processor = traits.work_items_per_processor;
  in.split_waves = traits.split_waves;
  in.fixed_split_size = split.fixed_split_size;
  in.disable_split_kv = split.disable_split_kv;
  if (capacity_) {
    in.capacity = ScheduleInput::Capacity{capacity_->max_batch, capacity_->max_qo_tokens,
                                          capacity_->max_kv * pr.page_size, -1, capacity_->max_kv};
  }
  return make_schedule(in, profile);
}

WorkspaceSize MLAPlan::workspace_size(const MLAPlanArgs& args) const {
  const Checked c = check_plan(args);
  const Schedule s = make_plan_schedule(c, args.split);
  return {s.layout.float_bytes, s.layout.int_bytes};
}

void MLAPlan::plan(const MLAPlanArgs& args) {
  // Every check first, on local values: a plan() that throws on its arguments leaves
  // the plan in place. The upload then writes the workspace; if it fails (out of
  // memory) there is no plan, and run() throws until the next plan().
  const Checked c = check_plan(args);
  KernelKey kernel;
  Schedule s = make_plan_schedule(c, args.split, &kernel);
  workspace_.check_fits(kOp, s.layout);
  planned_ = false;
  workspace_.upload(kOp, s, c.problem.batch_size, c.problem.nnz_q);
  kv_indices_ = args.kv_indices;
  problem_ = c.problem;
  kernel_ = kernel;
  schedule_ = std::move(s);
  planned_ = true;
}

void MLAPlan::reset_workspace_buffer(const TensorView& float_buffer, const TensorView& int_buffer) {
  if (workspace_.use_buffers(kOp, float_buffer, int_buffer, planned_ ? &schedule_.layout : nullptr) &&
      planned_) {
    planned_ = false;  // until the schedule is in the new buffer
    workspace_.upload(kOp, schedule_, problem_.batch_size, problem_.nnz_q);
    planned_ = true;
  }
}

void MLAPlan::check_run(const TensorView& q_nope, const TensorView& q_pe, const MLACache& cache,
                        const TensorView& out, const MLARunOptions& options) const {
  require(planned_, kOp, "plan", "(none)", "run() needs a successful plan() first");
  const MLAProblem& pr = problem_;
  const auto check_rows = [&](std::string_view name, const TensorView& t, DType dtype, std::int64_t dim,
                              std::string_view why_dim) {
    check_rank(kOp, name, t, 3);
    check_device(kOp, name, t, device_);
    check_dtype(kOp, name, t, dtype);
    check_size(kOp, name, t, 0, pr.nnz_q, "qo_indptr[batch_size] of the plan");
    check_size(kOp, name, t, 1, pr.num_heads, "num_heads of the plan");
    check_size(kOp, name, t, 2, dim, why_dim);
    check_last_dim_contiguous(kOp, name, t);
  };
  check_rows("q_nope", q_nope, pr.q_dtype, pr.head_dim_ckv, "head_dim_ckv of the plan");
  if (pr.head_dim_kpe > 0) {
    check_rows("q_pe", q_pe, pr.q_dtype, pr.head_dim_kpe, "head_dim_kpe of the plan");
  } else {
    require(!q_pe.defined(), kOp, "q_pe", q_pe.describe(), "must be absent when head_dim_kpe is 0");
  }
  check_rows("out", out, pr.o_dtype, pr.head_dim_ckv, "head_dim_ckv of the plan");

  if (options.lse.defined()) {
    check_rank(kOp, "lse", options.lse, 2);
    check_device(kOp, "lse", options.lse, device_);
    check_dtype(kOp, "lse", options.lse, DType::kF32);
    check_size(kOp, "lse", options.lse, 0, pr.nnz_q, "qo_indptr[batch_size] of the plan");
    check_size(kOp, "lse", options.lse, 1, pr.num_heads, "num_heads of the plan");
  }
  check_finite(kOp, "ckv_scale", options.ckv_scale, true, "must be finite and positive");
  check_finite(kOp, "kpe_scale", options.kpe_scale, true, "must be finite and positive");

  validate_mla_cache(kOp, cache);
  check_device(kOp, "ckv_cache", cache.ckv, device_);
  check_dtype(kOp, "ckv_cache", cache.ckv, pr.kv_dtype);
  check_size(kOp, "ckv_cache", cache.ckv, 1, pr.page_size, "page_size of the plan");
  check_size(kOp, "ckv_cache", cache.ckv, 2, pr.head_dim_ckv, "head_dim_ckv of the plan");
  if (pr.head_dim_kpe > 0) {
    require(cache.kpe.defined(), kOp, "kpe_cache", "(absent)",
            later("the plan has head_dim_kpe {}: the cache needs its rotary part", pr.head_dim_kpe));
    check_size(kOp, "kpe_cache", cache.kpe, 2, pr.head_dim_kpe, "head_dim_kpe of the plan");
  } else {
    require(!cache.kpe.defined(), kOp, "kpe_cache", cache.kpe.describe(),
            "must be absent when head_dim_kpe is 0 (MLACache::combined of a [pages, page_size, 512] tensor)");
  }

  // On a GPU the kernels check the page ids (the device status).
  if (device_.is_cpu()) {
    check_page_ids(kOp, kv_indices_, pr.nnz_kv, cache.num_pages(), "pages in the cache", false);
  } else if (pr.nnz_kv > 0) {  // the kernel clamps a bad id into the cache: a page must exist
    const std::int64_t pages = pr.head_dim_kpe > 0 ? std::min(cache.num_pages(), cache.kpe.size(0)) : cache.num_pages();
    require_v(pages > 0, kOp, "ckv_cache.shape[0]", 0,
              later("the cache has no pages, but the plan reads {} page ids", pr.nnz_kv));
  }
}

void MLAPlan::run(const TensorView& q_nope, const TensorView& q_pe, const MLACache& cache,
                  const TensorView& out, const MLARunOptions& options) const {
  check_run(q_nope, q_pe, cache, out, options);
  MLAParams p;
  p.problem = problem_;
  p.ckv_scale = options.ckv_scale;
  p.kpe_scale = options.kpe_scale;
  p.lse_base_e = options.lse_base_e;
  p.q_nope = q_nope;
  p.q_pe = q_pe;
  p.o = out;
  p.lse = options.lse;
  p.ckv = cache.ckv;
  p.kpe = cache.kpe;
  p.kv_indices = kv_indices_;
  bind_schedule(p, workspace_.view(schedule_.layout), schedule_);
  p.kernel = kernel_;
  p.q_tile_rows = schedule_.q_tile_rows;
  p.max_chunks = schedule_.max_chunks;
  p.fixed_split = schedule_.fixed_split;
  p.stream = options.stream;
  backend_->run_mla(p);
  if (checked_run(options.check_indices))
    take_status(device_, p.schedule.status, options.stream).throw_if_bad(kOp);
}

IndexStatus MLAPlan::status(Stream stream) const {
  if (!planned_) return {};
  return take_status(device_, workspace_.view(schedule_.layout).status, stream);
}

}  // namespace kvinfer::detail

namespace kvinfer {

BatchMLAPagedAttention::BatchMLAPagedAttention(Device device, std::optional<Capacity> capacity)
    : impl_(std::make_unique<detail::MLAPlan>(device, capacity)) {}
BatchMLAPagedAttention::~BatchMLAPagedAttention() = default;
BatchMLAPagedAttention::BatchMLAPagedAttention(BatchMLAPagedAttention&&) noexcept = default;
BatchMLAPagedAttention& BatchMLAPagedAttention::operator=(BatchMLAPagedAttention&&) noexcept = default;

WorkspaceSize BatchMLAPagedAttention::workspace_size(const MLAPlanArgs& args) const {
  return impl_->workspace_size(args);
}
void BatchMLAPagedAttention::plan(const MLAPlanArgs& args) {
  impl_->plan(args);
}
void BatchMLAPagedAttention::reset_workspace_buffer(const TensorView& float_workspace_buffer,
                                                    const TensorView& int_workspace_buffer) {
  impl_->reset_workspace_buffer(float_workspace_buffer, int_workspace_buffer);
}
void BatchMLAPagedAttention::run(const TensorView& q_nope, const TensorView& q_pe, const MLACache& cache,
                                 const TensorView& out, const MLARunOptions& options) const {
  impl_->run(q_nope, q_pe, cache, out, options);
}
IndexStatus BatchMLAPagedAttention::status(Stream stream) {
  return impl_->status(stream);
}

}  // namespace kvinfer
