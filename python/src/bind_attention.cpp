// SPDX-License-Identifier: Apache-2.0
// The plan/run wrappers as Python classes. Each mirrors its C++ wrapper one to one:
// plan() takes the C++ plan arguments (host length arrays, the arrays run() reads on
// the wrapper's device), run() the tensors of one call. kvinfer/*.py gives them
// FlashInfer's signatures; every check is the C++ library's.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "tensor_arg.hpp"

namespace kvinfer::python {
namespace {

using CapacityTuple = std::tuple<std::int64_t, std::int64_t, std::int64_t>;

std::optional<Capacity> to_capacity(const std::optional<CapacityTuple>& c) {
  if (!c) return std::nullopt;
  return Capacity{std::get<0>(*c), std::get<1>(*c), std::get<2>(*c)};
}

SplitOptions split_options(std::int64_t fixed_split_size, bool disable_split_kv) {
  return {.fixed_split_size = fixed_split_size, .disable_split_kv = disable_split_kv};
}

// Everything the plan() of a decode, prefill or cascade wrapper takes after the
// problem's shape, as one tuple (kvinfer/_utils.py's attention_plan_options builds it):
// pos_encoding_mode, window_left, sm_scale, logits_soft_cap, rope_scale, rope_theta,
// backend, the q / kv / o dtype names, fixed_split_size (tokens, -1 none) and
// disable_split_kv.
using PlanOptions = std::tuple<std::string, int, std::optional<float>, float, float, float, std::string,
                               std::string, std::string, std::string, std::int64_t, bool>;

// `args` (the problem's shape and arrays) with the fields every attention plan's
// arguments have: options, dtypes and split.
template <class Args>
Args with_plan_options(std::string_view op, Args args, MaskMode mask, const PlanOptions& plan) {
  const auto& [pos_encoding_mode, window_left, sm_scale, logits_soft_cap, rope_scale, rope_theta, backend,
               q_dtype, kv_dtype, o_dtype, fixed_split_size, disable_split_kv] = plan;
  args.options = attention_options(op, mask, pos_encoding_mode, window_left, logits_soft_cap, sm_scale, rope_scale,
                                   rope_theta, backend);
  args.q_dtype = dtype_arg(op, "q_data_type", q_dtype);
  args.kv_dtype = dtype_arg(op, "kv_data_type", kv_dtype);
  args.o_dtype = dtype_arg(op, "o_data_type", o_dtype);
  args.split = split_options(fixed_split_size, disable_split_kv);
  return args;
}

RunOptions run_options(const TensorArg& lse, float k_scale, float v_scale, std::uintptr_t stream,
                       std::optional<bool> enable_pdl) {
  return {.lse = lse.view,
          .k_scale = k_scale,
          .v_scale = v_scale,
          .stream = as_stream(stream),
          .enable_pdl = enable_pdl};
}

// What every Python wrapper keeps between plan() and run(): its device, the dtypes
// planned (raw uint16/uint8 storage is read as them), references to the caller's
// arrays the plan points into, and the C++ wrapper. One template serves every
// wrapper: the workspace, the plan's bookkeeping and the paged run() are the same.
template <class Impl>
class Wrapper {
 public:
  Device device = Device::cpu();
  KVLayout layout = KVLayout::kNHD;
  DType q = DType::kF16, kv = DType::kF16, o = DType::kF16;
  nb::object float_workspace, int_workspace;  // the caller's buffers the plans live in
  // kv_indices, a caller-packed mask: run() reads them. Every Python object held here
  // is shown to the garbage collector (gc_slots below).
  std::vector<nb::object> plan_refs;
  bool planned = false;

  // The decode and prefill wrappers (inherited as their constructors; def_init passes
  // the class's kOp): Impl(device, layout, capacity).
  Wrapper(std::string_view op, nb::handle float_workspace_buffer, const std::string& kv_layout,
          std::optional<CapacityTuple> capacity)
      : Wrapper(op, float_workspace_buffer, kv_layout,
                [&](Device d, KVLayout l) { return Impl(d, l, to_capacity(capacity)); }) {}

  std::string device_name() const { return to_string(device); }

  // The device status (kvinfer/core/index_status.hpp), read and cleared: None, or
  // (array, index, value, message) of the first bad page id since plan() or the last call.
  std::optional<std::tuple<std::string, std::int64_t, std::int64_t, std::string>> status(std::uintptr_t stream) {
    IndexStatus s;
    {
      nb::gil_scoped_release release;
      s = w_.status(as_stream(stream));
    }
    if (s.ok()) return std::nullopt;
    return std::tuple{s.array, s.index, s.value, s.message()};
  }

  // FlashInfer's float_workspace_buffer (and int_workspace_buffer; None keeps the
  // wrapper's own): the plans live there from now on.
  void reset_workspace_buffer(nb::handle float_buffer, nb::handle int_buffer) {
    const TensorArg f = tensor_out(op_, "float_workspace_buffer", float_buffer);
    const TensorArg i = tensor_out(op_, "int_workspace_buffer", int_buffer, std::nullopt, true);
    w_.reset_workspace_buffer(f.view, i.view);
    float_workspace = nb::borrow(float_buffer);
    int_workspace = nb::borrow(int_buffer);
  }

  // run() of a wrapper over a paged cache (decode, paged prefill, cascade).
  void run_paged(nb::handle q_, nb::handle k_, nb::handle v_, nb::handle out_, nb::handle lse_, float k_scale,
                 float v_scale, std::uintptr_t stream, std::optional<bool> enable_pdl) const {
    const TensorArg aq = tensor_arg(op_, "q", q_, q);
    const TensorArg ak = tensor_arg(op_, "paged_kv_cache", k_, kv);
    const TensorArg av = tensor_arg(op_, "paged_kv_cache[1]", v_, kv, true);
    const TensorArg aout = tensor_out(op_, "out", out_, o);
    const TensorArg alse = tensor_out(op_, "lse", lse_, DType::kF32, true);
    const PagedKVCache cache = paged_cache(ak, av, layout);
    const RunOptions options = run_options(alse, k_scale, v_scale, stream, enable_pdl);
    nb::gil_scoped_release release;
    w_.run(aq.view, cache, aout.view, options);
  }

 protected:
  // make(device) builds the C++ wrapper on float_workspace_buffer's device.
  template <class Make>
  Wrapper(std::string_view op, nb::handle float_workspace_buffer, std::optional<std::string_view> kv_layout,
          Make&& make)
      : device(device_arg(op, "float_workspace_buffer", float_workspace_buffer)),
        layout(kv_layout ? kv_layout_arg(op, *kv_layout) : KVLayout::kNHD),
        w_(make(device, layout)),
        op_(op) {
    reset_workspace_buffer(float_workspace_buffer, nb::none());
  }

  // The plan, made with the GIL released; then the dtypes run() reads raw storage as,
  // and the caller's arrays the plan points into.
  template <class Args>
  void commit(const Args& args, DType o_dtype, std::vector<nb::object> refs) {
    {
      nb::gil_scoped_release release;
      w_.plan(args);
    }
    q = args.q_dtype, kv = args.kv_dtype, o = o_dtype;
    plan_refs = std::move(refs);
    planned = true;
  }

  // plan() of a prefill wrapper: `args` (its arrays and shape) with the custom mask,
  // which replaces causal (FlashInfer's rule), and the plan's options; run() reads
  // the mask and the arrays in `refs`.
  template <class Args>
  void plan_prefill(Args args, nb::handle custom_mask, bool causal, const PlanOptions& options,
                    std::vector<nb::object> refs) {
    const TensorArg a_mask = tensor_arg(op_, "custom_mask", custom_mask, std::nullopt, true);
    args.custom_mask = a_mask.view;
    args = with_plan_options(op_, std::move(args), mask_mode(a_mask, causal), options);
    refs.push_back(nb::borrow(custom_mask));
    commit(args, args.o_dtype, std::move(refs));
  }

  Impl w_;
  std::string_view op_;
};

// ---------------------------------------------------------------- decode
class Decode : public Wrapper<BatchDecodeWithPagedKVCache> {
 public:
  static constexpr std::string_view kOp = "BatchDecodeWithPagedKVCache";

  using Wrapper::Wrapper;

  void plan(nb::handle indptr, nb::handle indices, nb::handle last_page_len, std::int64_t num_qo_heads,
            std::int64_t num_kv_heads, std::int64_t head_dim, std::int64_t page_size, const PlanOptions& options,
            nb::handle position_offsets) {
    const PageTableArg table = page_table_arg(kOp, indptr, indices, last_page_len);
    const TensorArg a_pos = tensor_arg(kOp, "position_offsets", position_offsets, std::nullopt, true);
    const DecodePlanArgs args = with_plan_options(kOp,
                                                  DecodePlanArgs{.page_table = table.table(),
                                                                 .num_qo_heads = num_qo_heads,
                                                                 .num_kv_heads = num_kv_heads,
                                                                 .head_dim = head_dim,
                                                                 .page_size = page_size,
                                                                 .position_offsets = a_pos.view},
                                                  MaskMode::kNone, options);
    // indptr, last_page_len and the offsets too: time_step() plans from them again.
    commit(args, args.o_dtype,
           {nb::borrow(indices), nb::borrow(indptr), nb::borrow(last_page_len), nb::borrow(position_offsets)});
    last_args_ = args;
  }

  // The host cost of one decode step in C++ (bench/python/bench_host.py): the last
  // plan() again (unless `replan` is false: the runs of the current plan alone), then
  // `runs` run() calls, timed without Python in between (µs).
  double time_step(nb::handle q_, nb::handle k_, nb::handle v_, nb::handle out_, int runs,
                   std::uintptr_t stream, bool replan) {
    if (!last_args_) throw Error(kOp, "plan", "(none)", "time_step() needs a plan() first");
    const TensorArg aq = tensor_arg(kOp, "q", q_, q);
    const TensorArg ak = tensor_arg(kOp, "paged_kv_cache", k_, kv);
    const TensorArg av = tensor_arg(kOp, "paged_kv_cache[1]", v_, kv, true);
    const TensorArg aout = tensor_out(kOp, "out", out_, o);
    const PagedKVCache cache = paged_cache(ak, av, layout);
    const RunOptions options{.stream = as_stream(stream)};
    nb::gil_scoped_release release;
    const auto t0 = std::chrono::steady_clock::now();
    if (replan) w_.plan(*last_args_);
    for (int r = 0; r < runs; ++r) w_.run(aq.view, cache, aout.view, options);
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }

 private:
  std::optional<DecodePlanArgs> last_args_;  // points into plan_refs' arrays
};

// ---------------------------------------------------------------- paged prefill
class PagedPrefill : public Wrapper<BatchPrefillWithPagedKVCache> {
 public:
  static constexpr std::string_view kOp = "BatchPrefillWithPagedKVCache";

  using Wrapper::Wrapper;

  void plan(nb::handle qo_indptr, nb::handle indptr, nb::handle indices, nb::handle last_page_len,
            std::int64_t num_qo_heads, std::int64_t num_kv_heads, std::int64_t head_dim,
            std::int64_t page_size, nb::handle custom_mask, bool causal, const PlanOptions& options,
            nb::handle position_offsets) {
    const TensorArg a_qo = tensor_arg(kOp, "qo_indptr", qo_indptr);
    const PageTableArg table = page_table_arg(kOp, indptr, indices, last_page_len);
    const TensorArg a_pos = tensor_arg(kOp, "position_offsets", position_offsets, std::nullopt, true);
    plan_prefill(PagedPrefillPlanArgs{.qo_indptr = a_qo.view,
                                      .page_table = table.table(),
                                      .num_qo_heads = num_qo_heads,
                                      .num_kv_heads = num_kv_heads,
                                      .head_dim = head_dim,
                                      .page_size = page_size,
                                      .position_offsets = a_pos.view},
                 custom_mask, causal, options, {nb::borrow(indices)});
  }
};

// ---------------------------------------------------------------- ragged prefill
class RaggedPrefill : public Wrapper<BatchPrefillWithRaggedKVCache> {
 public:
  static constexpr std::string_view kOp = "BatchPrefillWithRaggedKVCache";

  using Wrapper::Wrapper;

  void plan(nb::handle qo_indptr, nb::handle kv_indptr, std::int64_t num_qo_heads, std::int64_t num_kv_heads,
            std::int64_t head_dim_qk, std::int64_t head_dim_vo, nb::handle custom_mask, bool causal,
            const PlanOptions& options, nb::handle position_offsets) {
    const TensorArg a_qo = tensor_arg(kOp, "qo_indptr", qo_indptr);
    const TensorArg a_kv = tensor_arg(kOp, "kv_indptr", kv_indptr);
    const TensorArg a_pos = tensor_arg(kOp, "position_offsets", position_offsets, std::nullopt, true);
    plan_prefill(RaggedPrefillPlanArgs{.qo_indptr = a_qo.view,
                                       .kv_indptr = a_kv.view,
                                       .num_qo_heads = num_qo_heads,
                                       .num_kv_heads = num_kv_heads,
                                       .head_dim_qk = head_dim_qk,
                                       .head_dim_vo = head_dim_vo,
                                       .position_offsets = a_pos.view},
                 custom_mask, causal, options, {});
  }

  void run(nb::handle q_, nb::handle k_, nb::handle v_, nb::handle out_, nb::handle lse_, float k_scale,
           float v_scale, std::uintptr_t stream, std::optional<bool> enable_pdl) const {
    const TensorArg aq = tensor_arg(kOp, "q", q_, q);
    const TensorArg ak = tensor_arg(kOp, "k", k_, kv);
    const TensorArg av = tensor_arg(kOp, "v", v_, kv);
    const TensorArg aout = tensor_out(kOp, "out", out_, o);
    const TensorArg alse = tensor_out(kOp, "lse", lse_, DType::kF32, true);
    const RunOptions options = run_options(alse, k_scale, v_scale, stream, enable_pdl);
    nb::gil_scoped_release release;
    w_.run(aq.view, ak.view, av.view, aout.view, options);
  }
};

// ---------------------------------------------------------------- cascade
class Cascade : public Wrapper<MultiLevelCascadeAttention> {
 public:
  static constexpr std::string_view kOp = "MultiLevelCascadeAttention";

  Cascade(int num_levels, nb::handle float_workspace_buffer, const std::string& kv_layout,
          const std::vector<CapacityTuple>& capacities)
      : Wrapper(kOp, float_workspace_buffer, kv_layout, [&](Device d, KVLayout l) {
          std::vector<Capacity> caps;
          for (const CapacityTuple& t : capacities) caps.push_back(*to_capacity(t));
          return MultiLevelCascadeAttention(num_levels, d, l, std::move(caps));
        }) {}

  void plan(const std::vector<nb::handle>& qo_indptr, const std::vector<nb::handle>& kv_indptr,
            const std::vector<nb::handle>& kv_indices, const std::vector<nb::handle>& kv_last_page_len,
            std::int64_t num_qo_heads, std::int64_t num_kv_heads, std::int64_t head_dim,
            std::int64_t page_size, bool causal, const PlanOptions& options) {
    const std::size_t n = qo_indptr.size();
    for (auto [name, size] : {std::pair{"paged_kv_indptr_arr", kv_indptr.size()},
                              std::pair{"paged_kv_indices_arr", kv_indices.size()},
                              std::pair{"paged_kv_last_page_len", kv_last_page_len.size()}}) {
      if (size != n) {
        throw Error(kOp, std::string(name) + ".size()", std::to_string(size),
                    "must equal qo_indptr_arr.size() (" + std::to_string(n) + "), one entry per level");
      }
    }
    std::vector<TensorArg> keep;
    keep.reserve(4 * n);
    CascadePlanArgs args;
    for (std::size_t i = 0; i < n; ++i) {
      std::string l = "[";  // appended, not `"[" + ...`: GCC 12 warns (-Wrestrict) on that form
      l += std::to_string(i);
      l += ']';
      const TensorArg& qo = keep.emplace_back(tensor_arg(kOp, "qo_indptr_arr" + l, qo_indptr[i]));
      const TensorArg& ip = keep.emplace_back(tensor_arg(kOp, "paged_kv_indptr_arr" + l, kv_indptr[i]));
      const TensorArg& ix = keep.emplace_back(tensor_arg(kOp, "paged_kv_indices_arr" + l, kv_indices[i]));
      const TensorArg& lp =
          keep.emplace_back(tensor_arg(kOp, "paged_kv_last_page_len" + l, kv_last_page_len[i]));
      args.levels.push_back(
          {.qo_indptr = qo.view, .page_table = {.indptr = ip.view, .indices = ix.view, .last_page_len = lp.view}});
    }
    args.num_qo_heads = num_qo_heads;
    args.num_kv_heads = num_kv_heads;
    args.head_dim = head_dim;
    args.page_size = page_size;
    args = with_plan_options(kOp, std::move(args), causal ? MaskMode::kCausal : MaskMode::kNone, options);
    std::vector<nb::object> refs;
    for (nb::handle h : kv_indices) refs.push_back(nb::borrow(h));
    commit(args, args.o_dtype, std::move(refs));
  }
};

// ---------------------------------------------------------------- MLA
class MLA : public Wrapper<BatchMLAPagedAttention> {
 public:
  static constexpr std::string_view kOp = "BatchMLAPagedAttention";

  MLA(nb::handle float_workspace_buffer, std::optional<CapacityTuple> capacity)
      : Wrapper(kOp, float_workspace_buffer, std::nullopt, [&](Device d, KVLayout) {
          return BatchMLAPagedAttention(d, to_capacity(capacity));
        }) {}

  void plan(nb::handle qo_indptr, nb::handle kv_indptr, nb::handle kv_indices, nb::handle kv_len,
            std::int64_t num_heads, std::int64_t head_dim_ckv, std::int64_t head_dim_kpe,
            std::int64_t page_size, bool causal, std::optional<float> sm_scale, const std::string& q_dtype,
            const std::string& kv_dtype, std::optional<std::string> o_dtype, std::int64_t fixed_split_size,
            bool disable_split_kv) {
    const TensorArg a_qo = tensor_arg(kOp, "qo_indptr", qo_indptr);
    const TensorArg a_kv = tensor_arg(kOp, "kv_indptr", kv_indptr);
    const TensorArg a_ix = tensor_arg(kOp, "kv_indices", kv_indices);
    const TensorArg a_len = tensor_arg(kOp, "kv_len", kv_len);
    MLAPlanArgs args{
        .qo_indptr = a_qo.view,
        .kv_indptr = a_kv.view,
        .kv_indices = a_ix.view,
        .kv_len = a_len.view,
        .num_heads = num_heads,
        .head_dim_ckv = head_dim_ckv,
        .head_dim_kpe = head_dim_kpe,
        .page_size = page_size,
        .causal = causal,
        .sm_scale = sm_scale,
        .q_dtype = dtype_arg(kOp, "q_data_type", q_dtype),
        .kv_dtype = dtype_arg(kOp, "kv_data_type", kv_dtype),
        .o_dtype = o_dtype ? std::optional(dtype_arg(kOp, "output_dtype", *o_dtype)) : std::nullopt,
        .split = split_options(fixed_split_size, disable_split_kv),
    };
    commit(args, args.o_dtype.value_or(args.q_dtype), {nb::borrow(kv_indices)});
    head_dim_ckv_ = head_dim_ckv;
  }

  // q_pe None: q_nope is the packed query [nnz, H, ckv + kpe] (sliced here, no copy);
  // kpe None: ckv is the packed cache [pages, page_size, ckv + kpe].
  void run(nb::handle q_nope, nb::handle q_pe, nb::handle ckv, nb::handle kpe, nb::handle out_,
           nb::handle lse_, bool lse_base_e, float ckv_scale, float kpe_scale, std::uintptr_t stream) const {
    const TensorArg an = tensor_arg(kOp, "q_nope", q_nope, q);
    const TensorArg ap = tensor_arg(kOp, "q_pe", q_pe, q, true);
    const TensorArg ac = tensor_arg(kOp, "ckv_cache", ckv, kv);
    const TensorArg ak = tensor_arg(kOp, "kpe_cache", kpe, kv, true);
    const TensorArg aout = tensor_out(kOp, "out", out_, o);
    const TensorArg alse = tensor_out(kOp, "lse", lse_, DType::kF32, true);
    TensorView qn = an.view, qp = ap.view;
    if (!qp.defined() && qn.rank() == 3 && qn.size(-1) > head_dim_ckv_) {
      qp = qn.slice(-1, head_dim_ckv_, qn.size(-1));
      qn = qn.slice(-1, 0, head_dim_ckv_);
    }
    const MLACache cache =
        ak.defined() ? MLACache::pair(ac.view, ak.view) : MLACache::combined(ac.view, head_dim_ckv_);
    const MLARunOptions options{.lse = alse.view,
                                .lse_base_e = lse_base_e,
                                .ckv_scale = ckv_scale,
                                .kpe_scale = kpe_scale,
                                .stream = as_stream(stream)};
    nb::gil_scoped_release release;
    w_.run(qn, qp, cache, aout.view, options);
  }

 private:
  std::int64_t head_dim_ckv_ = kMlaHeadDimCkv;
};

// The Python objects a wrapper holds, shown to Python's garbage collector: a reference
// cycle through them (a caller's buffer whose attributes lead back to the Python
// wrapper that holds this one) is then collected, where it would otherwise outlive
// the interpreter and nanobind would report the wrapper leaked at exit.
template <class W>
int gc_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));  // a heap type's instances reference it
  if (!nb::inst_ready(self)) return 0;
  const W* w = nb::inst_ptr<W>(self);
  Py_VISIT(w->float_workspace.ptr());
  Py_VISIT(w->int_workspace.ptr());
  for (const nb::object& ref : w->plan_refs) Py_VISIT(ref.ptr());
  return 0;
}

template <class W>
int gc_clear(PyObject* self) {
  W* w = nb::inst_ptr<W>(self);
  w->float_workspace.reset();
  w->int_workspace.reset();
  w->plan_refs.clear();
  return 0;
}

template <class W>
PyType_Slot gc_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(&gc_traverse<W>)},
                          {Py_tp_clear, reinterpret_cast<void*>(&gc_clear<W>)},
                          {0, nullptr}};

// A method of Wrapper<Impl> as one of W: nanobind converts `self` to the class that
// declares the method, and only W is registered.
template <class W, class Base, class R, class... A>
auto method_of(R (Base::*f)(A...) const) {
  return [f](const W& w, A... a) -> R { return (w.*f)(std::forward<A>(a)...); };
}
template <class W, class Base, class R, class... A>
auto method_of(R (Base::*f)(A...)) {
  return [f](W& w, A... a) -> R { return (w.*f)(std::forward<A>(a)...); };
}

// The class of one wrapper, with what every wrapper binds: the workspace, the device
// and the planned dtypes.
template <class W>
nb::class_<W> wrapper_class(nb::module_& m, const char* name, const char* doc) {
  nb::class_<W> c(m, name, doc, nb::type_slots(gc_slots<W>));
  c.def("reset_workspace_buffer", method_of<W>(&W::reset_workspace_buffer), nb::arg("float_workspace_buffer"),
        nb::arg("int_workspace_buffer").none() = nb::none(),
        "The caller's workspace buffers (contiguous, 16-byte aligned, on the wrapper's device); a plan that "
        "needs more raises kvinfer.Error naming the buffer and the bytes.");
  c.def_prop_ro("device", method_of<W>(&W::device_name),
                "The wrapper's device (\"cpu\", \"cuda:0\"), from float_workspace_buffer.")
      .def_prop_ro("planned", [](const W& w) { return w.planned; })
      .def_prop_ro("q_data_type", [](const W& w) { return std::string(dtype_name(w.q)); })
      .def_prop_ro("kv_data_type", [](const W& w) { return std::string(dtype_name(w.kv)); })
      .def_prop_ro("o_data_type", [](const W& w) { return std::string(dtype_name(w.o)); })
      .def("status", method_of<W>(&W::status), nb::arg("stream"),
           "status(stream): None, or (array, index, value, message) of the first bad page id the kernels "
           "met since plan() or the last status(), which this clears (waits for the stream).");
  return c;
}

// run(q, k, v, out, lse, k_scale, v_scale, stream, enable_pdl) of the decode and
// prefill wrappers.
template <class W, class Run>
void def_run(nb::class_<W>& c, Run run) {
  using nb::arg;
  c.def("run", method_of<W>(run), arg("q"), arg("k").none(), arg("v").none(), arg("out").none(), arg("lse").none(),
        arg("k_scale"), arg("v_scale"), arg("stream"), arg("enable_pdl").none(),
        "run(q, k, v, out, lse, k_scale, v_scale, stream, enable_pdl): one call of the plan. v None: k is the "
        "5-D paged cache. Allocates nothing; every tensor on the wrapper's device.");
}

// The constructor (float_workspace_buffer, kv_layout="NHD", capacity=None) of a
// decode or prefill wrapper.
template <class W>
void def_init(nb::class_<W>& c) {
  using nb::arg;
  c.def(
      "__init__",
      [](W* w, nb::handle float_workspace_buffer, const std::string& kv_layout,
         std::optional<CapacityTuple> capacity) { new (w) W(W::kOp, float_workspace_buffer, kv_layout, capacity); },
      arg("float_workspace_buffer"), arg("kv_layout") = "NHD", arg("capacity").none() = nb::none());
}

}  // namespace

void bind_attention(nb::module_& m) {
  using nb::arg;

  auto decode = wrapper_class<Decode>(
      m, "BatchDecodeWithPagedKVCache",
      "kvinfer::BatchDecodeWithPagedKVCache; kvinfer.decode wraps it with FlashInfer's API.");
  def_init(decode);
  def_run(decode, &Decode::run_paged);
  decode
      .def("plan", &Decode::plan, arg("indptr"), arg("indices"), arg("last_page_len"), arg("num_qo_heads"),
           arg("num_kv_heads"), arg("head_dim"), arg("page_size"), arg("options"),
           arg("position_offsets").none() = nb::none())
      .def("time_step", &Decode::time_step, arg("q"), arg("k"), arg("v").none(), arg("out"), arg("runs"),
           arg("stream"), arg("replan") = true,
           "Benchmark hook: the last plan() again (replan) plus `runs` run() calls, timed in C++ (microseconds).");

  auto paged = wrapper_class<PagedPrefill>(m, "BatchPrefillWithPagedKVCache",
                                           "kvinfer::BatchPrefillWithPagedKVCache; kvinfer.prefill wraps it.");
  def_init(paged);
  def_run(paged, &PagedPrefill::run_paged);
  paged.def("plan", &PagedPrefill::plan, arg("qo_indptr"), arg("indptr"), arg("indices"), arg("last_page_len"),
            arg("num_qo_heads"), arg("num_kv_heads"), arg("head_dim"), arg("page_size"),
            arg("custom_mask").none(), arg("causal"), arg("options"),
            arg("position_offsets").none() = nb::none());

  auto ragged = wrapper_class<RaggedPrefill>(m, "BatchPrefillWithRaggedKVCache",
                                             "kvinfer::BatchPrefillWithRaggedKVCache; kvinfer.prefill wraps it.");
  def_init(ragged);
  def_run(ragged, &RaggedPrefill::run);
  ragged.def("plan", &RaggedPrefill::plan, arg("qo_indptr"), arg("kv_indptr"), arg("num_qo_heads"),
             arg("num_kv_heads"), arg("head_dim_qk"), arg("head_dim_vo"), arg("custom_mask").none(),
             arg("causal"), arg("options"), arg("position_offsets").none() = nb::none());

  auto cascade = wrapper_class<Cascade>(m, "MultiLevelCascadeAttention",
                                        "kvinfer::MultiLevelCascadeAttention; kvinfer.cascade wraps it.");
  cascade.def(nb::init<int, nb::handle, const std::string&, const std::vector<CapacityTuple>&>(),
              arg("num_levels"), arg("float_workspace_buffer"), arg("kv_layout") = "NHD",
              arg("capacities") = std::vector<CapacityTuple>{});
  def_run(cascade, &Cascade::run_paged);
  cascade.def("plan", &Cascade::plan, arg("qo_indptr_arr"), arg("paged_kv_indptr_arr"),
              arg("paged_kv_indices_arr"), arg("paged_kv_last_page_len"), arg("num_qo_heads"),
              arg("num_kv_heads"), arg("head_dim"), arg("page_size"), arg("causal"), arg("options"));

  auto mla = wrapper_class<MLA>(m, "BatchMLAPagedAttention", "kvinfer::BatchMLAPagedAttention; kvinfer.mla wraps it.");
  mla.def(nb::init<nb::handle, std::optional<CapacityTuple>>(), arg("float_workspace_buffer"),
          arg("capacity").none() = nb::none())
      .def("plan", &MLA::plan, arg("qo_indptr"), arg("kv_indptr"), arg("kv_indices"), arg("kv_len"),
           arg("num_heads"), arg("head_dim_ckv"), arg("head_dim_kpe"), arg("page_size"), arg("causal"),
           arg("sm_scale").none(), arg("q_data_type"), arg("kv_data_type"), arg("o_data_type").none(),
           arg("fixed_split_size"), arg("disable_split_kv"))
      .def("run", &MLA::run, arg("q_nope"), arg("q_pe").none(), arg("ckv_cache").none(),
           arg("kpe_cache").none(), arg("out").none(), arg("lse").none(), arg("lse_base_e"), arg("ckv_scale"),
           arg("kpe_scale"), arg("stream"),
           "run(q_nope, q_pe, ckv_cache, kpe_cache, out, lse, ...): q_pe None reads q_nope as the packed "
           "[nnz, H, ckv + kpe] query; kpe_cache None reads ckv_cache as the packed [pages, page_size, ckv + "
           "kpe] cache (strided views, no copy).");
}

}  // namespace kvinfer::python
