// SPDX-License-Identifier: Apache-2.0
// MultiLevelCascadeAttention: one paged-prefill plan per level over the shared
// q/o and page pool; run attends the last level into out, then each other level
// into a scratch state that is merged into out in place. On the GPU the last level
// runs on a side stream, concurrently with the level before it: the last level is
// typically a bandwidth-bound decode over each request's own pages, the one before
// a tensor-core bound attention of all requests' queries to a shared prefix, and
// the two use different parts of the device.
//
// A plan is atomic over the levels: every level is checked and scheduled first
// (AttentionPlan::prepare), and only then are the levels' buffers written, so that
// a bad argument at any level leaves the whole previous plan in place; a failure
// while writing (out of memory) leaves no plan, and run() throws.
#include "kvinfer/attention/cascade.hpp"

#include <fmt/format.h>

#include <memory>

#include "core/attention_plan.hpp"
#include "core/check.hpp"
#include "core/device_status_host.hpp"
#include "core/workspace.hpp"
#include "core/stream_fork.hpp"
#include "kvinfer/attention/prefill.hpp"
#include "kvinfer/ops/merge.hpp"

namespace kvinfer {
namespace {
constexpr std::string_view kOp = "MultiLevelCascadeAttention";
constexpr std::string_view kLevelOp = "BatchPrefillWithPagedKVCache";  // what a level's errors name
}

struct MultiLevelCascadeAttention::Impl {
  Device device;
  KVLayout layout = KVLayout::kNHD;
  std::vector<std::unique_ptr<detail::AttentionPlan>> levels;
  std::vector<Capacity> capacities;
  std::int64_t nnz_q = 0, num_qo_heads = 0, head_dim = 0;
  DType o_dtype = DType::kBF16;
  bool planned = false;
  // Scratch of the non-last levels and the LSE of out when the caller wants none;
  // allocated in plan (fixed by the capacity in CUDA-graph mode), never in run.
  Tensor scratch_o, scratch_lse, out_lse;
  // The side stream of the last level (CUDA, two or more levels); made in plan.
  std::unique_ptr<detail::StreamFork> fork;
  // The caller's workspace buffers, shared out among the levels at each plan.
  TensorView float_workspace, int_workspace;

  // The caller's buffers cut into one part per level of `prepared` (checked to fit).
  struct Parts {
    std::vector<TensorView> float_parts, int_parts;
  };
  Parts workspace_parts(const std::vector<detail::AttentionPlan::Prepared>& prepared) const;

  // The first level's violation, clearing every level's status.
  IndexStatus take_status(Stream stream) const {
    IndexStatus first;
    for (const auto& level : levels) {
      IndexStatus s = level->status(stream);
      if (first.ok()) first = std::move(s);
    }
    return first;
  }
};

namespace {

constexpr std::size_t kAlign = 256;  // each level's part starts at a multiple of the schedule's alignment
std::size_t align_up(std::size_t x) {
  return (x + kAlign - 1) / kAlign * kAlign;
}

// The caller's buffers cut into one part per level. The last level runs beside the
// one before it (a side stream), so it has a float part of its own; the other levels
// run one after another and share theirs. Each level's plan needs its own int part.
}  // namespace

MultiLevelCascadeAttention::Impl::Parts MultiLevelCascadeAttention::Impl::workspace_parts(
    const std::vector<detail::AttentionPlan::Prepared>& prepared) const {
  const std::size_t num_levels = prepared.size();
  std::size_t float_shared = 0, int_total = 0;
  for (std::size_t l = 0; l < num_levels; ++l) {
    const detail::WorkspaceLayout& ws = prepared[l].schedule.layout;
    if (l + 1 < num_levels) float_shared = std::max(float_shared, align_up(ws.float_bytes));
    int_total += align_up(ws.int_bytes);
  }
  const std::size_t float_last = align_up(prepared.back().schedule.layout.float_bytes);
  const auto check = [](const TensorView& buffer, std::string_view name, std::size_t need) {
    if (!buffer.defined()) return;
    const std::size_t have = std::size_t(buffer.numel()) * buffer.element_size();
    detail::require(have >= need, kOp, name, fmt::format("{} bytes", have),
                    fmt::format("the plan needs {} bytes (one part per level)", need));
  };
  check(float_workspace, "float_workspace_buffer", float_last + float_shared);
  check(int_workspace, "int_workspace_buffer", int_total);
  const auto part = [](const TensorView& buffer, std::size_t begin, std::size_t bytes) {
    if (!buffer.defined()) return TensorView();
    return TensorView(static_cast<std::uint8_t*>(buffer.data()) + begin, DType::kU8,
                      {std::int64_t(std::max<std::size_t>(bytes, 1))}, buffer.device());
  };
  Parts parts;
  std::size_t int_offset = 0;
  for (std::size_t l = 0; l < num_levels; ++l) {
    const bool last = l + 1 == num_levels;
    const std::size_t int_bytes = align_up(prepared[l].schedule.layout.int_bytes);
    parts.float_parts.push_back(last ? part(float_workspace, 0, float_last)
                                     : part(float_workspace, float_last, float_shared));
    parts.int_parts.push_back(part(int_workspace, int_offset, int_bytes));
    int_offset += int_bytes;
  }
  return parts;
}

MultiLevelCascadeAttention::MultiLevelCascadeAttention(int num_levels, Device device, KVLayout kv_layout,
                                                       std::vector<Capacity> capacities)
    : impl_(std::make_unique<Impl>()) {
  detail::require_v(num_levels >= 1, kOp, "num_levels", num_levels, "a cascade has at least one level");
  detail::require_v(capacities.empty() || std::int64_t(capacities.size()) == num_levels, kOp,
                    "capacities.size()", capacities.size(),
                    fmt::format("must be 0 or num_levels ({})", num_levels));
  impl_->device = device;
  impl_->layout = kv_layout;
  impl_->capacities = capacities;
  for (int l = 0; l < num_levels; ++l) {
    impl_->levels.push_back(std::make_unique<detail::AttentionPlan>(
        kOp, device, kv_layout, capacities.empty() ? std::nullopt : std::optional<Capacity>(capacities[l])));
  }
}
MultiLevelCascadeAttention::~MultiLevelCascadeAttention() = default;
MultiLevelCascadeAttention::MultiLevelCascadeAttention(MultiLevelCascadeAttention&&) noexcept = default;
MultiLevelCascadeAttention& MultiLevelCascadeAttention::operator=(MultiLevelCascadeAttention&&) noexcept =
    default;

void MultiLevelCascadeAttention::plan(const CascadePlanArgs& args) {
  Impl& m = *impl_;
  const auto num_levels = std::int64_t(m.levels.size());
  detail::require_v(std::int64_t(args.levels.size()) == num_levels, kOp, "levels.size()", args.levels.size(),
                    fmt::format("must equal num_levels ({})", num_levels));
  const AttentionOptions& o = args.options;
  detail::require(o.mask_mode != MaskMode::kCustom, kOp, "options.mask_mode", "custom",
                  "a cascade supports mask_mode none or causal (causal applies to the last level)");
  detail::require(o.pos_encoding == PosEncoding::kNone, kOp, "options.pos_encoding",
                  pos_encoding_name(o.pos_encoding),
                  "RoPE and ALiBi need per-level query and key positions, which cascades do not support yet; "
                  "apply RoPE before appending to the cache");
  detail::require_v(o.window_left == -1, kOp, "options.window_left", o.window_left,
                    "a sliding window needs per-level positions, which cascades do not support yet");

  std::int64_t nnz_q = -1;
  std::vector<PagedPrefillPlanArgs> level_args;
  for (std::int64_t l = 0; l < num_levels; ++l) {
    const CascadeLevel& level = args.levels[l];
    const std::string arg = fmt::format("levels[{}].qo_indptr", l);
    detail::check_index_array(kOp, arg, level.qo_indptr);
    detail::require(level.qo_indptr.device().is_cpu() && level.qo_indptr.size(0) >= 1, kOp, arg,
                    level.qo_indptr.describe(), "must be a host int32 array of subtrees + 1 >= 1 entries");
    const std::int64_t rows = level.qo_indptr.data_as<const std::int32_t>()[level.qo_indptr.size(0) - 1];
    if (nnz_q < 0) nnz_q = rows;
    detail::require_v(rows == nnz_q, kOp, fmt::format("{}[-1]", arg), rows,
                      fmt::format("every level covers all query rows (levels[0] has {})", nnz_q));
    AttentionOptions level_options = o;
    if (l + 1 < num_levels) level_options.mask_mode = MaskMode::kNone;
    level_args.push_back({.qo_indptr = level.qo_indptr,
                          .page_table = level.page_table,
                          .num_qo_heads = args.num_qo_heads,
                          .num_kv_heads = args.num_kv_heads,
                          .head_dim = args.head_dim,
                          .page_size = args.page_size,
                          .options = level_options,
                          .q_dtype = args.q_dtype,
                          .kv_dtype = args.kv_dtype,
                          .o_dtype = args.o_dtype,
                          .split = args.split});
  }
  // Every level checked and scheduled before any is written.
  std::vector<detail::AttentionPlan::Prepared> prepared;
  for (std::int64_t l = 0; l < num_levels; ++l) {
    prepared.push_back(m.levels[l]->prepare(detail::paged_prefill_request(level_args[l], m.device)));
  }
  const bool caller_buffers = m.float_workspace.defined() || m.int_workspace.defined();
  Impl::Parts parts;
  if (caller_buffers) {
    parts = m.workspace_parts(prepared);
  } else {
    for (std::int64_t l = 0; l < num_levels; ++l) m.levels[l]->check_workspace(prepared[l]);
  }

  // Scratch buffers: sized by the capacity in CUDA-graph mode so that they never move.
  const std::int64_t rows = m.capacities.empty() ? nnz_q : m.capacities.back().max_qo_tokens;
  const auto fits = [&](const Tensor& t, std::initializer_list<std::int64_t> shape, DType dtype) {
    return t.defined() && t.dtype() == dtype && t.size(0) >= *shape.begin() &&
           std::equal(shape.begin() + 1, shape.end(), t.view().shape().begin() + 1);
  };
  const std::initializer_list<std::int64_t> o_shape{rows, args.num_qo_heads, args.head_dim};
  const std::initializer_list<std::int64_t> lse_shape{rows, args.num_qo_heads};
  if (num_levels > 1 && !m.capacities.empty()) {
    for (auto [t, shape, dtype] : {std::tuple{&m.scratch_o, o_shape, args.o_dtype},
                                   std::tuple{&m.scratch_lse, lse_shape, DType::kF32},
                                   std::tuple{&m.out_lse, lse_shape, DType::kF32}}) {
      detail::require(!t->defined() || fits(*t, shape, dtype), kOp, "capacities", "scratch",
                      "a fixed-capacity cascade must not reallocate its scratch buffers");
    }
  }

  // The levels' buffers are written: until all hold the new plan there is none.
  m.planned = false;
  for (std::int64_t l = 0; l < num_levels; ++l) {
    if (caller_buffers) {
      m.levels[l]->commit_into(std::move(prepared[l]), parts.float_parts[l], parts.int_parts[l]);
    } else {
      m.levels[l]->commit(std::move(prepared[l]));
    }
  }
  const auto ensure = [&](Tensor& t, std::initializer_list<std::int64_t> shape, DType dtype) {
    if (fits(t, shape, dtype)) return;
    t = Tensor();
    t = Tensor::empty(shape, dtype, m.device);
  };
  if (num_levels > 1) {
    ensure(m.scratch_o, o_shape, args.o_dtype);
    ensure(m.scratch_lse, lse_shape, DType::kF32);
    ensure(m.out_lse, lse_shape, DType::kF32);
  }
  if (num_levels > 1 && m.device.is_cuda() && !m.fork)
    m.fork = std::make_unique<detail::StreamFork>(m.device);
  m.nnz_q = nnz_q;
  m.num_qo_heads = args.num_qo_heads;
  m.head_dim = args.head_dim;
  m.o_dtype = args.o_dtype;
  m.planned = true;
}

void MultiLevelCascadeAttention::reset_workspace_buffer(const TensorView& float_workspace_buffer,
                                                        const TensorView& int_workspace_buffer) {
  Impl& m = *impl_;
  for (auto [name, t] : {std::pair{"float_workspace_buffer", &float_workspace_buffer},
                         std::pair{"int_workspace_buffer", &int_workspace_buffer}}) {
    if (!t->defined()) continue;
    detail::check_device(kOp, name, *t, m.device);
    detail::require(t->is_contiguous(), kOp, name, t->describe(), "must be contiguous");
    detail::require(reinterpret_cast<std::uintptr_t>(t->data()) % detail::kWorkspaceAlign == 0, kOp, name,
                    t->describe(), fmt::format("must be {}-byte aligned", detail::kWorkspaceAlign));
  }
  m.float_workspace = float_workspace_buffer;
  m.int_workspace = int_workspace_buffer;
  if (!float_workspace_buffer.defined() && !int_workspace_buffer.defined()) {
    for (auto& level : m.levels) level->reset_workspace_buffer(kLevelOp, {}, {});
  }
  m.planned = false;  // the levels' parts are assigned by the next plan
}

void MultiLevelCascadeAttention::run(const TensorView& q, const PagedKVCache& cache, const TensorView& out,
                                     const RunOptions& options) const {
  const Impl& m = *impl_;
  detail::require(m.planned, kOp, "plan", "(none)", "run() needs a successful plan() first");
  detail::require(cache.layout == m.layout, kOp, "paged_kv_cache.layout", kv_layout_name(cache.layout),
                  detail::later("must be the wrapper's layout ({})", kv_layout_name(m.layout)));
  run_levels(q, cache, out, options);
  // With device index checks, the checked mode reads the levels' statuses once, after
  // every kernel (without them, each level checks its page ids before its kernels).
  if (detail::kDeviceIndexChecks && detail::checked_run(options.check_indices))
    impl_->take_status(options.stream).throw_if_bad(kOp);
}

IndexStatus MultiLevelCascadeAttention::status(Stream stream) {
  return impl_->take_status(stream);
}

void MultiLevelCascadeAttention::run_levels(const TensorView& q, const PagedKVCache& cache, const TensorView& out,
                                            const RunOptions& options) const {
  const Impl& m = *impl_;
  const auto num_levels = std::int64_t(m.levels.size());
  const auto run_level = [&](std::int64_t l, const TensorView& o, RunOptions opts) {
    if (detail::kDeviceIndexChecks) opts.check_indices = false;
    m.levels[l]->run(kLevelOp, q, cache.k, cache.v, o, opts);
  };
  if (num_levels == 1) {
    run_level(0, out, options);
    return;
  }
  const TensorView lse = options.lse.defined() ? options.lse : m.out_lse.view().slice(0, 0, m.nnz_q);
  // The last level writes out and lse (on the side stream where there is one), the
  // level before it the scratch state; both only read q and the cache. The side
  // stream joins before the first merge into out, and also when a level throws,
  // so that a CUDA-graph capture is never left with an unjoined stream.
  const TensorView scratch_o = m.scratch_o.view().slice(0, 0, m.nnz_q);
  const TensorView scratch_lse = m.scratch_lse.view().slice(0, 0, m.nnz_q);
  RunOptions last = options, level = options;
  last.lse = lse;
  level.lse = scratch_lse;
  if (m.fork) last.stream = m.fork->fork(options.stream);
  try {
    run_level(num_levels - 1, out, last);
    run_level(num_levels - 2, scratch_o, level);
  } catch (...) {
    if (m.fork) m.fork->join(options.stream);
    throw;
  }
  if (m.fork) m.fork->join(options.stream);
  merge_state_in_place(out, lse, scratch_o, scratch_lse, {}, options.stream);
  for (std::int64_t l = num_levels - 3; l >= 0; --l) {
    run_level(l, scratch_o, level);
    merge_state_in_place(out, lse, scratch_o, scratch_lse, {}, options.stream);
  }
}

}  // namespace kvinfer
