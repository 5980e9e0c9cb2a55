// SPDX-License-Identifier: Apache-2.0
#include "core/attention_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "backend/backend.hpp"
#include "core/check.hpp"
#include "core/device_status_host.hpp"
#include "core/plan_checks.hpp"
#include "kvinfer/ops/packbits.hpp"

namespace kvinfer::detail {
namespace {

// The CPU backend attends any head dim that is a multiple of 16 up to 512; the
// CUDA backend narrows this to its compiled instances.
constexpr std::int64_t kMaxHeadDim = 512;

bool is_supported_head_dim(std::int64_t d) {
  return d >= 16 && d <= kMaxHeadDim && d % 16 == 0;
}

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

// The backends' kernel choice and launch know no caller and name their errors
// "attention"; the user called a wrapper (or single_prefill), so their errors are
// raised again under its name, argument, value and rule unchanged.
template <class F>
decltype(auto) as_caller(std::string_view op, F&& call) {
  try {
    return call();
  } catch (const Error& e) {
    if (e.op() != "attention") throw;
    throw Error(op, e.argument(), e.value(), e.rule());
  }
}

}  // namespace

AttentionPlan::AttentionPlan(std::string_view op, Device device, KVLayout layout, std::optional<Capacity> capacity)
    : device_(device), layout_(layout), capacity_(capacity), workspace_(device, capacity.has_value()) {
  check_kv_layout(op, "kv_layout", layout);
  check_wrapper_device(op, device);
  if (capacity) check_capacity(op, *capacity);
  backend_ = &backend_for(device);
  profile_ = backend_->profile(device.index);
}

AttentionProblem AttentionPlan::check_problem(const PlanRequest& req) const {
  const std::string_view op = req.op;
  AttentionProblem pr;
  pr.storage = req.storage;
  pr.layout = layout_;
  pr.batch_size = std::int64_t(req.qo_lens.size());
  pr.nnz_q = std::accumulate(req.qo_lens.begin(), req.qo_lens.end(), std::int64_t(0));
  pr.nnz_kv = req.nnz_kv;
  pr.max_qo_len = req.qo_lens.empty() ? 0 : *std::max_element(req.qo_lens.begin(), req.qo_lens.end());

  // Counts are range-checked before anything is multiplied by them.
  const std::string heads_rule = fmt::format("must be in [1, {}]", kMaxHeads);
  require_v(req.num_qo_heads > 0 && req.num_qo_heads <= kMaxHeads, op, "num_qo_heads", req.num_qo_heads,
            heads_rule);
  require_v(req.num_kv_heads > 0 && req.num_kv_heads <= kMaxHeads, op, "num_kv_heads", req.num_kv_heads,
            heads_rule);
  if (req.num_qo_heads % req.num_kv_heads != 0) {
    fail(op, "num_qo_heads", std::to_string(req.num_qo_heads),
         fmt::format("must be a multiple of num_kv_heads ({})", req.num_kv_heads));
  }
  pr.num_qo_heads = req.num_qo_heads;
  pr.num_kv_heads = req.num_kv_heads;

  const std::string_view dim_rule = "must be a multiple of 16 in [16, 512]";
  require_v(is_supported_head_dim(req.head_dim_qk), op,
            req.storage == KVStorage::kRagged ? "head_dim_qk" : "head_dim", req.head_dim_qk, dim_rule);
  pr.head_dim_qk = req.head_dim_qk;
  pr.head_dim_vo = req.head_dim_vo == 0 ? req.head_dim_qk : req.head_dim_vo;
  require_v(is_supported_head_dim(pr.head_dim_vo), op, "head_dim_vo", pr.head_dim_vo, dim_rule);

  require_v(req.page_size >= 1 && req.page_size <= kInt32Max, op, "page_size", req.page_size,
            "must be in [1, 2^31 - 1]");
  pr.page_size = req.page_size;

  require(is_half(req.q_dtype), op, "q_dtype", dtype_name(req.q_dtype), "must be float16 or bfloat16");
  require(is_half(req.kv_dtype) || is_fp8(req.kv_dtype), op, "kv_dtype", dtype_name(req.kv_dtype),
          "must be float16, bfloat16, float8_e4m3 or float8_e5m2");
  require(is_half(req.o_dtype), op, "o_dtype", dtype_name(req.o_dtype), "must be float16 or bfloat16");
  pr.q_dtype = req.q_dtype;
  pr.kv_dtype = req.kv_dtype;
  pr.o_dtype = req.o_dtype;

  const AttentionOptions& o = req.options;
  check_options_enums(op, o);
  pr.mask_mode = o.mask_mode;
  if (o.mask_mode == MaskMode::kCustom) {
    require(req.custom_mask.defined(), op, "custom_mask", "(absent)",
            "mask_mode custom needs a custom_mask (bool, or uint8 packed little-endian)");
  } else {
    require(!req.custom_mask.defined(), op, "custom_mask", req.custom_mask.describe(),
            o.mask_mode == MaskMode::kCausal ? "causal and a custom mask cannot be combined"
                                             : "a custom mask needs mask_mode = custom");
  }
  require_v(o.window_left >= -1, op, "options.window_left", o.window_left, "must be -1 (off) or >= 0");
  pr.window_left = o.window_left;  // normalised below, once the longest request is known
  check_finite(op, "options.logits_soft_cap", o.logits_soft_cap, false, "must be finite and >= 0 (0: off)");
  pr.logits_soft_cap = o.logits_soft_cap;
  pr.sm_scale = o.sm_scale.value_or(1.0f / std::sqrt(float(pr.head_dim_qk)));
  check_finite(op, "options.sm_scale", pr.sm_scale, true, "must be finite and positive");
  pr.pos_encoding = o.pos_encoding;
  if (o.pos_encoding == PosEncoding::kRopeLlama) {
    check_finite(op, "options.rope_scale", o.rope_scale, true, "must be finite and positive");
    check_finite(op, "options.rope_theta", o.rope_theta, true, "must be finite and positive");
  }
  pr.backend = o.backend;
  pr.rope_rcp_scale = 1.0f / o.rope_scale;
  pr.rope_rcp_theta = 1.0f / o.rope_theta;
  if (o.pos_encoding == PosEncoding::kAlibi && !o.alibi_slopes.empty()) {
    require_v(std::int64_t(o.alibi_slopes.size()) == pr.num_qo_heads, op, "options.alibi_slopes.size()",
              o.alibi_slopes.size(), fmt::format("must equal num_qo_heads ({})", pr.num_qo_heads));
  }
  require_v(req.split.fixed_split_size == -1 || req.split.fixed_split_size > 0, op, "split.fixed_split_size",
            req.split.fixed_split_size, "must be -1 (automatic) or positive");

  std::int64_t max_kv_len = 0;
  for (const std::int32_t len : req.kv_lens) max_kv_len = std::max<std::int64_t>(max_kv_len, len);
  pr.length_free_kernel =
      req.max_qo_len < 0 && (req.split.disable_split_kv || req.split.fixed_split_size > 0);
  if (capacity_) {
    // The lengths are checked against the capacity by make_schedule. Kernels are
    // chosen for the capacity's longest request, not this batch's: every re-plan
    // keeps the kernel, its tile and so the workspace layout and grid.
    pr.max_qo_len =
        std::int32_t(std::min<std::int64_t>(req.max_qo_len >= 0 ? req.max_qo_len : capacity_->max_qo_tokens,
                                            kInt32Max));
    // The capacity's longest request (capacity fields are < 2^31, so is page_size).
    max_kv_len = std::min(kInt32Max, req.storage == KVStorage::kPaged ? capacity_->max_kv * pr.page_size
                                                                       : capacity_->max_kv);
  }
  // A request's packed rows (tokens x group) are int32 rows of its work items.
  require_v(std::int64_t(pr.max_qo_len) * pr.group_size() <= kInt32Max, op,
            capacity_ && req.max_qo_len < 0 ? "capacity.max_qo_tokens" : "qo_indptr", pr.max_qo_len,
            later("a request's query rows times the GQA group ({}) must fit in int32", pr.group_size()));
  // Position offsets: on the CPU backend only, and each keeps its request's positions,
  // from the first row's window start to the last row's key bound, within int32.
  std::int64_t max_offset = 0, min_offset = 0;
  for (std::size_t b = 0; b < req.position_offsets.size(); ++b) {
    const std::int64_t d = req.position_offsets[b];
    if (d == 0) continue;
    const std::string arg = fmt::format("position_offsets[{}]", b);
    require_v(device_.is_cpu(), op, arg, d,
              "non-zero position offsets run on the CPU backend (the CUDA kernels take rows at the "
              "bottom-right of their keys)");
    const std::int64_t qo = req.qo_lens[b], kv = req.kv_lens[b];
    const std::int64_t lo = kv - qo + d - std::max(0, o.window_left), hi = kv + d;
    require_v(lo >= -kInt32Max && hi <= kInt32Max && qo - d >= -kInt32Max && qo - d <= kInt32Max, op, arg, d,
              fmt::format("must keep the request's positions (kv_len {} - qo_len {} + offset - window_left "
                          "to kv_len + offset) within int32",
                          kv, qo));
    max_offset = std::max(max_offset, d);
    min_offset = std::min(min_offset, d);
  }
  // A window at least as long as every request's last position hides nothing: it is
  // no window (so that a window near INT32_MAX never enters the mask's int32
  // arithmetic). Any other keeps i_pos - window_left within int32.
  if (pr.window_left >= max_kv_len + max_offset) pr.window_left = -1;
  require_v(pr.window_left < 0 || std::int64_t(pr.window_left) + pr.max_qo_len - min_offset <= kInt32Max, op,
            "options.window_left", o.window_left,
            fmt::format("plus the longest request's query rows ({}) must fit in int32", pr.max_qo_len));
  return pr;
}

Schedule AttentionPlan::make_plan_schedule(const PlanRequest& req, const AttentionProblem& pr,
                                           std::span<const std::int64_t> mask_offsets,
                                           KernelKey* kernel_out) const {
  ScheduleInput in;
  in.op = req.op;
  in.qo_lens = req.qo_lens;
  in.kv_lens = req.kv_lens;
  in.kv_begin = req.kv_begin;
  in.nnz_kv = pr.nnz_kv;
  in.num_qo_heads = pr.num_qo_heads;
  in.num_kv_heads = pr.num_kv_heads;
  in.head_dim_vo = pr.head_dim_vo;
  in.page_size = pr.page_size;
  in.window_left = pr.window_left;
  in.position_offsets = req.position_offsets;
  // The kernel that will run the plan shapes its work items.
  const AttentionKernelTraits traits =
      as_caller(req.op, [&] { return backend_->attention_kernel(pr, device_.index); });
  if (kernel_out) *kernel_out = traits.key;
  in.q_tile_rows = traits.q_tile_rows;
  DeviceProfile profile = profile_;
  profile.work_items_per_processor = traits.work_items_per_processor;
  in.split_waves = traits.split_waves;
  in.min_chunk_tokens = traits.min_chunk_tokens;
  in.max_item_warps = traits.max_item_warps;
  in.fixed_split_size = req.split.fixed_split_size;
  in.disable_split_kv = req.split.disable_split_kv;
  in.mask_offsets = mask_offsets;
  if (capacity_) {
    const std::int64_t max_kv_tokens =
        pr.storage == KVStorage::kPaged ? capacity_->max_kv * pr.page_size : capacity_->max_kv;
    in.capacity = ScheduleInput::Capacity{capacity_->max_batch, capacity_->max_qo_tokens, max_kv_tokens,
                                          req.max_qo_len, capacity_->max_kv};
  }
  return make_schedule(in, profile);
}

WorkspaceSize AttentionPlan::workspace_size(const PlanRequest& req) const {
  const AttentionProblem pr = check_problem(req);
  const Schedule s = make_plan_schedule(req, pr, {}, nullptr);
  return {s.layout.float_bytes, s.layout.int_bytes};
}

AttentionPlan::Prepared AttentionPlan::prepare(const PlanRequest& req) const {
  const std::string_view op = req.op;
  Prepared out;
  out.op = op;
  out.problem = check_problem(req);
  const AttentionProblem& pr = out.problem;

  // The custom mask, packed per request with byte offsets (SPEC §2).
  std::vector<std::int64_t> mask_offsets;
  if (pr.mask_mode == MaskMode::kCustom) {
    const TensorView& m = req.custom_mask;
    check_device(op, "custom_mask", m, device_);
    check_rank(op, "custom_mask", m, 1);
    require(m.dtype() == DType::kBool || m.dtype() == DType::kU8, op, "custom_mask.dtype",
            dtype_name(m.dtype()),
            "must be bool (one element per entry) or uint8 (bit-packed, little bit order)");
    require_v(m.size(0) <= 1 || m.stride(0) == 1, op, "custom_mask.stride(0)", m.stride(0),
              "must be contiguous");
    mask_offsets = mask_indptr(req.qo_lens, req.kv_lens, /*packed=*/true);
    if (m.dtype() == DType::kBool) {
      const std::vector<std::int64_t> elems = mask_indptr(req.qo_lens, req.kv_lens, /*packed=*/false);
      require_v(m.size(0) == elems.back(), op, "custom_mask.shape[0]", m.size(0),
                fmt::format("must equal sum(qo_len * kv_len) = {}", elems.back()));
      require_v(elems.back() <= std::numeric_limits<std::int32_t>::max(), op, "custom_mask.shape[0]",
                elems.back(), "a boolean mask has at most 2^31 - 1 entries; pass it bit-packed instead");
      Tensor indptr_host = Tensor::empty({std::int64_t(elems.size())}, DType::kI32);
      for (std::size_t i = 0; i < elems.size(); ++i)
        indptr_host.data_as<std::int32_t>()[i] = std::int32_t(elems[i]);
      Tensor indptr = device_.is_cpu() ? std::move(indptr_host) : indptr_host.to(device_);
      out.mask_packed = std::move(segment_packbits(m, indptr, BitOrder::kLittle).data);
    } else {
      require_v(
          m.size(0) == mask_offsets.back(), op, "custom_mask.shape[0]", m.size(0),
          fmt::format("a packed mask has sum(ceil(qo_len * kv_len / 8)) = {} bytes (each request padded "
                      "to a whole byte)",
                      mask_offsets.back()));
      out.caller_mask = m;  // the caller's buffer (its address is the caller's to keep)
    }
  }

  out.schedule = make_plan_schedule(req, pr, mask_offsets, &out.kernel);
  if (pr.pos_encoding == PosEncoding::kAlibi) {
    out.alibi_slopes =
        req.options.alibi_slopes.empty() ? alibi_slopes(int(pr.num_qo_heads)) : req.options.alibi_slopes;
  }
  out.kv_indices = req.kv_indices;
  if (std::any_of(req.position_offsets.begin(), req.position_offsets.end(), [](std::int32_t d) { return d != 0; }))
    out.position_offsets = req.position_offsets;
  return out;
}

void AttentionPlan::check_workspace(const Prepared& p) const {
  workspace_.check_fits(p.op, p.schedule.layout);
}

void AttentionPlan::commit(Prepared&& p) {
  const std::string_view op = p.op;
  const AttentionProblem& pr = p.problem;
  // From here on the buffers run() reads change: until they all hold the new plan,
  // there is none (a failure below leaves run() throwing, never a mixed plan).
  planned_ = false;
  custom_mask_ = {};
  if (p.mask_packed.defined()) {
    // The packed mask lives in a buffer that re-plans reuse while it is large enough:
    // a CUDA graph captured from run() holds its address.
    const std::int64_t bytes = p.mask_packed.numel();
    if (!custom_mask_packed_.defined() || custom_mask_packed_.numel() < bytes) {
      custom_mask_packed_ = Tensor();
      custom_mask_packed_ = Tensor::empty({std::max<std::int64_t>(bytes, 1)}, DType::kU8, device_);
    }
    custom_mask_ = custom_mask_packed_.view().slice(0, 0, bytes);
    copy(custom_mask_, p.mask_packed);
  } else if (p.caller_mask.defined()) {
    custom_mask_ = p.caller_mask;
  }

  workspace_.upload(op, p.schedule, pr.batch_size, pr.nnz_q);

  if (pr.pos_encoding == PosEncoding::kAlibi) {
    // Reused across re-plans with the same head count (a captured CUDA graph holds its address).
    if (!alibi_slopes_.defined() || alibi_slopes_.numel() != pr.num_qo_heads) {
      alibi_slopes_ = Tensor::empty({pr.num_qo_heads}, DType::kF32, device_);
    }
    copy(alibi_slopes_, TensorView(p.alibi_slopes.data(), DType::kF32, {pr.num_qo_heads}));
  }
  kv_indices_ = p.kv_indices;
  position_offsets_ = std::move(p.position_offsets);
  problem_ = pr;
  kernel_ = p.kernel;
  schedule_ = std::move(p.schedule);
  planned_ = true;
}

void AttentionPlan::commit_into(Prepared&& p, const TensorView& float_buffer, const TensorView& int_buffer) {
  planned_ = false;  // the plan in place is not in the new buffers
  workspace_.use_buffers(p.op, float_buffer, int_buffer, nullptr);
  commit(std::move(p));
}

void AttentionPlan::plan(const PlanRequest& req) {
  Prepared p = prepare(req);
  check_workspace(p);
  commit(std::move(p));
}

void AttentionPlan::reset_workspace_buffer(std::string_view op, const TensorView& float_buffer,
                                           const TensorView& int_buffer) {
  if (workspace_.use_buffers(op, float_buffer, int_buffer, planned_ ? &schedule_.layout : nullptr) &&
      planned_) {
    planned_ = false;  // until the schedule is in the new buffer
    workspace_.upload(op, schedule_, problem_.batch_size, problem_.nnz_q);
    planned_ = true;
  }
}

void AttentionPlan::check_run(std::string_view op, const TensorView& q, const TensorView& k,
                              const TensorView& v, const TensorView& out, const RunOptions& options) const {
  require(planned_, op, "plan", "(none)", "run() needs a successful plan() first");
  const AttentionProblem& pr = problem_;
  check_rank(op, "q", q, 3);
  check_device(op, "q", q, device_);
  check_dtype(op, "q", q, pr.q_dtype);
  check_size(op, "q", q, 0, pr.nnz_q, "qo_indptr[batch_size] of the plan");
  check_size(op, "q", q, 1, pr.num_qo_heads, "num_qo_heads of the plan");
  check_size(op, "q", q, 2, pr.head_dim_qk, "head_dim_qk of the plan");
  check_last_dim_contiguous(op, "q", q);

  check_rank(op, "out", out, 3);
  check_device(op, "out", out, device_);
  check_dtype(op, "out", out, pr.o_dtype);
  check_size(op, "out", out, 0, pr.nnz_q, "qo_indptr[batch_size] of the plan");
  check_size(op, "out", out, 1, pr.num_qo_heads, "num_qo_heads of the plan");
  check_size(op, "out", out, 2, pr.head_dim_vo, "head_dim_vo of the plan");
  check_last_dim_contiguous(op, "out", out);

  if (options.lse.defined()) {
    check_rank(op, "lse", options.lse, 2);
    check_device(op, "lse", options.lse, device_);
    check_dtype(op, "lse", options.lse, DType::kF32);
    check_size(op, "lse", options.lse, 0, pr.nnz_q, "qo_indptr[batch_size] of the plan");
    check_size(op, "lse", options.lse, 1, pr.num_qo_heads, "num_qo_heads of the plan");
  }
  require_v(std::isfinite(options.k_scale) && options.k_scale != 0.0f, op, "k_scale", options.k_scale,
            "must be finite and non-zero");
  require_v(std::isfinite(options.v_scale), op, "v_scale", options.v_scale, "must be finite");

  const bool nhd = layout_ == KVLayout::kNHD;
  const bool paged = pr.storage == KVStorage::kPaged;
  // (Names as literals: run() allocates nothing, not even for a name.)
  for (auto [name, t, dim] : {std::tuple{std::string_view(paged ? "paged_kv_cache.k" : "k"), &k, pr.head_dim_qk},
                              std::tuple{std::string_view(paged ? "paged_kv_cache.v" : "v"), &v, pr.head_dim_vo}}) {
    const std::string_view n = name;
    const std::string_view why_dim = t == &k ? "head_dim_qk of the plan" : "head_dim_vo of the plan";
    if (!paged) {
      check_rank(op, n, *t, 3);
      check_size(op, n, *t, nhd ? 0 : 1, pr.nnz_kv, "kv_indptr[batch_size] of the plan");
      check_size(op, n, *t, nhd ? 1 : 0, pr.num_kv_heads, "num_kv_heads of the plan");
    } else {
      check_rank(op, n, *t, 4);
      check_size(op, n, *t, nhd ? 1 : 2, pr.page_size, "page_size of the plan");
      check_size(op, n, *t, nhd ? 2 : 1, pr.num_kv_heads, "num_kv_heads of the plan");
    }
    check_size(op, n, *t, -1, dim, why_dim);
    check_device(op, n, *t, device_);
    check_dtype(op, n, *t, pr.kv_dtype);
    check_last_dim_contiguous(op, n, *t);
  }

  // Page ids are read by run(): checked against the pages of both k and v (a pair of
  // views need not have as many) here on the CPU; on a GPU by the kernels where the
  // build has device index checks (the device status), else here in the checked mode
  // (RunOptions::check_indices, a copy to the host).
  if (pr.storage == KVStorage::kPaged) {
    const bool v_shorter = v.size(0) < k.size(0);
    const std::string_view pages_of = v_shorter ? "pages in paged_kv_cache.v" : "pages in paged_kv_cache.k";
    if (device_.is_cpu() || !kDeviceIndexChecks) {
      check_page_ids(op, kv_indices_, pr.nnz_kv, v_shorter ? v.size(0) : k.size(0), pages_of,
                     checked_run(options.check_indices));
    } else if (pr.nnz_kv > 0) {  // every id of an empty cache is bad: named here instead
      require_v(std::min(k.size(0), v.size(0)) > 0, op, v_shorter ? "paged_kv_cache.v.shape[0]" : "paged_kv_cache.k.shape[0]",
                0, later("the cache has no pages, but the plan reads {} page ids", pr.nnz_kv));
    }
  }
}

void AttentionPlan::run(std::string_view op, const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& out, const RunOptions& options) const {
  check_run(op, q, k, v, out, options);
  AttentionParams p;
  p.problem = problem_;
  p.kernel = kernel_;
  p.sm_scale = problem_.sm_scale * options.k_scale;
  p.v_scale = options.v_scale;
  p.q = q;
  p.o = out;
  p.lse = options.lse;
  p.k = k;
  p.v = v;
  p.kv_indices = kv_indices_;
  p.alibi_slopes = alibi_slopes_.defined() ? alibi_slopes_.data_as<const float>() : nullptr;
  p.custom_mask = custom_mask_.defined() ? custom_mask_.data_as<const std::uint8_t>() : nullptr;
  p.position_offsets = position_offsets_.empty() ? nullptr : position_offsets_.data();
  bind_schedule(p, workspace_.view(schedule_.layout), schedule_);
  p.q_tile_rows = schedule_.q_tile_rows;
  p.max_chunks = schedule_.max_chunks;
  p.fixed_split = schedule_.fixed_split;
  p.item_warps = schedule_.item_warps;
  p.stream = options.stream;
  p.enable_pdl = options.enable_pdl;
  as_caller(op, [&] { backend_->run_attention(p); });
  if (kDeviceIndexChecks && !device_.is_cpu() && checked_run(options.check_indices))
    take_status(device_, p.schedule.status, options.stream).throw_if_bad(op);
}

IndexStatus AttentionPlan::status(Stream stream) const {
  if (!planned_) return {};
  return take_status(device_, workspace_.view(schedule_.layout).status, stream);
}

}  // namespace kvinfer::detail
