// SPDX-License-Identifier: Apache-2.0
// The free functions: single-request attention, state merges, page operations and
// bit packing. Outputs are caller-provided (kvinfer/*.py allocates them where
// FlashInfer's functions return new tensors), except segment_packbits, whose output
// size depends on the data.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <vector>

#include "bindings.hpp"
#include "tensor_arg.hpp"

namespace kvinfer::python {
namespace {

void single_prefill_py(nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse,
                       nb::handle custom_mask, bool causal, const std::string& kv_layout,
                       const std::string& pos_encoding_mode, int window_left, float logits_soft_cap,
                       std::optional<float> sm_scale, float rope_scale, float rope_theta, float k_scale,
                       float v_scale, const std::string& backend, std::uintptr_t stream) {
  constexpr std::string_view op = "single_prefill";
  const TensorArg aq = tensor_arg(op, "q", q), ak = tensor_arg(op, "k", k), av = tensor_arg(op, "v", v);
  const TensorArg aout = tensor_out(op, "out", out, aq.view.dtype());
  const TensorArg alse = tensor_out(op, "lse", lse, DType::kF32, true);
  const TensorArg amask = tensor_arg(op, "custom_mask", custom_mask, std::nullopt, true);
  const SinglePrefillArgs args{
      .options = attention_options(op, mask_mode(amask, causal), pos_encoding_mode, window_left, logits_soft_cap,
                                   sm_scale, rope_scale, rope_theta, backend),
      .custom_mask = amask.view,
      .kv_layout = kv_layout_arg(op, kv_layout)};
  const RunOptions run{.lse = alse.view, .k_scale = k_scale, .v_scale = v_scale, .stream = as_stream(stream)};
  nb::gil_scoped_release release;
  single_prefill(aq.view, ak.view, av.view, aout.view, args, run);
}

void single_decode_py(nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse,
                      const std::string& kv_layout, const std::string& pos_encoding_mode, int window_left,
                      float logits_soft_cap, std::optional<float> sm_scale, float rope_scale,
                      float rope_theta, float k_scale, float v_scale, std::uintptr_t stream) {
  constexpr std::string_view op = "single_decode";
  const TensorArg aq = tensor_arg(op, "q", q), ak = tensor_arg(op, "k", k), av = tensor_arg(op, "v", v);
  const TensorArg aout = tensor_out(op, "out", out, aq.view.dtype());
  const TensorArg alse = tensor_out(op, "lse", lse, DType::kF32, true);
  const SingleDecodeArgs args{
      .options = attention_options(op, MaskMode::kNone, pos_encoding_mode, window_left, logits_soft_cap,
                                   sm_scale, rope_scale, rope_theta, "auto"),
      .kv_layout = kv_layout_arg(op, kv_layout)};
  const RunOptions run{.lse = alse.view, .k_scale = k_scale, .v_scale = v_scale, .stream = as_stream(stream)};
  nb::gil_scoped_release release;
  single_decode(aq.view, ak.view, av.view, aout.view, args, run);
}

void merge_state_py(nb::handle v_a, nb::handle s_a, nb::handle v_b, nb::handle s_b, nb::handle v_out,
                    nb::handle s_out, std::uintptr_t stream) {
  constexpr std::string_view op = "merge_state";
  const TensorArg a = tensor_arg(op, "v_a", v_a), sa = tensor_arg(op, "s_a", s_a);
  const TensorArg b = tensor_arg(op, "v_b", v_b, a.view.dtype()), sb = tensor_arg(op, "s_b", s_b);
  const TensorArg vo = tensor_out(op, "v_merged", v_out, a.view.dtype()),
                  so = tensor_out(op, "s_merged", s_out);
  nb::gil_scoped_release release;
  merge_state(a.view, sa.view, b.view, sb.view, vo.view, so.view, as_stream(stream));
}

void merge_state_in_place_py(nb::handle v, nb::handle s, nb::handle v_other, nb::handle s_other,
                             nb::handle mask, std::uintptr_t stream) {
  constexpr std::string_view op = "merge_state_in_place";
  const TensorArg av = tensor_out(op, "v", v), as = tensor_out(op, "s", s);
  const TensorArg ao = tensor_arg(op, "v_other", v_other, av.view.dtype()),
                  aso = tensor_arg(op, "s_other", s_other);
  const TensorArg am = tensor_arg(op, "mask", mask, std::nullopt, true);
  nb::gil_scoped_release release;
  merge_state_in_place(av.view, as.view, ao.view, aso.view, am.view, as_stream(stream));
}

void merge_states_py(nb::handle v, nb::handle s, nb::handle v_out, nb::handle s_out, std::uintptr_t stream) {
  constexpr std::string_view op = "merge_states";
  const TensorArg av = tensor_arg(op, "v", v), as = tensor_arg(op, "s", s);
  const TensorArg vo = tensor_out(op, "v_merged", v_out, av.view.dtype()),
                  so = tensor_out(op, "s_merged", s_out);
  nb::gil_scoped_release release;
  merge_states(av.view, as.view, vo.view, so.view, as_stream(stream));
}

// Appending copies elements unconverted: raw 16-bit storage needs no dtype name.
constexpr DType kRawBits16 = DType::kF16;

void append_paged_kv_cache_py(nb::handle append_key, nb::handle append_value, nb::handle batch_indices,
                              nb::handle positions, nb::handle k_cache, nb::handle v_cache,
                              nb::handle kv_indices, nb::handle kv_indptr, nb::handle kv_last_page_len,
                              const std::string& kv_layout, std::uintptr_t stream) {
  constexpr std::string_view op = "append_paged_kv_cache";
  const TensorArg ak = tensor_arg(op, "append_key", append_key, kRawBits16);
  const TensorArg av = tensor_arg(op, "append_value", append_value, kRawBits16);
  const TensorArg bi = tensor_arg(op, "batch_indices", batch_indices),
                  pos = tensor_arg(op, "positions", positions);
  const TensorArg ck = tensor_out(op, "paged_kv_cache", k_cache, kRawBits16);
  const TensorArg cv = tensor_out(op, "paged_kv_cache[1]", v_cache, kRawBits16, true);
  const PageTableArg table = page_table_arg(op, kv_indptr, kv_indices, kv_last_page_len);
  const PagedKVCache cache = paged_cache(ck, cv, kv_layout_arg(op, kv_layout));
  nb::gil_scoped_release release;
  append_paged_kv_cache(ak.view, av.view, bi.view, pos.view, cache, table.table(), as_stream(stream));
}

void append_paged_mla_kv_cache_py(nb::handle append_ckv, nb::handle append_kpe, nb::handle batch_indices,
                                  nb::handle positions, nb::handle ckv_cache, nb::handle kpe_cache,
                                  nb::handle kv_indices, nb::handle kv_indptr, nb::handle kv_last_page_len,
                                  std::uintptr_t stream) {
  constexpr std::string_view op = "append_paged_mla_kv_cache";
  const TensorArg ac = tensor_arg(op, "append_ckv", append_ckv, kRawBits16);
  const TensorArg ap = tensor_arg(op, "append_kpe", append_kpe, kRawBits16, true);
  const TensorArg bi = tensor_arg(op, "batch_indices", batch_indices),
                  pos = tensor_arg(op, "positions", positions);
  const TensorArg cc = tensor_out(op, "ckv_cache", ckv_cache, kRawBits16);
  const TensorArg kc = tensor_out(op, "kpe_cache", kpe_cache, kRawBits16, true);
  const PageTableArg table = page_table_arg(op, kv_indptr, kv_indices, kv_last_page_len);
  const MLACache cache = kc.defined() ? MLACache::pair(cc.view, kc.view) : MLACache::combined(cc.view);
  nb::gil_scoped_release release;
  append_paged_mla_kv_cache(ac.view, ap.view, bi.view, pos.view, cache, table.table(), as_stream(stream));
}

void get_batch_indices_positions_py(nb::handle append_indptr, nb::handle seq_lens, nb::handle batch_indices,
                                    nb::handle positions, std::uintptr_t stream) {
  constexpr std::string_view op = "get_batch_indices_positions";
  const TensorArg ai = tensor_arg(op, "append_indptr", append_indptr),
                  sl = tensor_arg(op, "seq_lens", seq_lens);
  const TensorArg bi = tensor_out(op, "batch_indices", batch_indices),
                  pos = tensor_out(op, "positions", positions);
  nb::gil_scoped_release release;
  get_batch_indices_positions(ai.view, sl.view, bi.view, pos.view, as_stream(stream));
}

void get_seq_lens_py(nb::handle kv_indptr, nb::handle kv_last_page_len, std::int64_t page_size,
                     nb::handle seq_lens, std::uintptr_t stream) {
  constexpr std::string_view op = "get_seq_lens";
  const TensorArg ip = tensor_arg(op, "kv_indptr", kv_indptr),
                  lp = tensor_arg(op, "kv_last_page_len", kv_last_page_len);
  const TensorArg out = tensor_out(op, "seq_lens", seq_lens);
  nb::gil_scoped_release release;
  get_seq_lens(ip.view, lp.view, page_size, out.view, as_stream(stream));
}

// One rank's shard of a host page table (kvinfer::shard_page_table): its kv_indptr,
// kv_indices and kv_last_page_len as int32 arrays of kv_indptr's kind (numpy or torch).
nb::tuple shard_page_table_py(nb::handle kv_indptr, nb::handle kv_indices, nb::handle kv_last_page_len,
                              std::int64_t page_size, int rank, int world, const std::string& policy) {
  constexpr std::string_view op = "shard_page_table";
  const PageTableArg t = page_table_arg(op, kv_indptr, kv_indices, kv_last_page_len);
  ShardPolicy p = ShardPolicy::kContiguous;
  if (policy == "striped") {
    p = ShardPolicy::kStriped;
  } else if (policy != "contiguous") {
    throw Error(op, "policy", policy, "must be \"contiguous\" or \"striped\"");
  }
  PageTableShard shard;
  {
    nb::gil_scoped_release release;
    shard = shard_page_table(t.table(), page_size, rank, world, p);
  }
  const auto array = [&](const std::vector<std::int32_t>& v) {
    Tensor x = Tensor::empty({std::int64_t(v.size())}, DType::kI32);
    std::copy(v.begin(), v.end(), x.data_as<std::int32_t>());
    return to_python(std::move(x), kv_indptr);
  };
  return nb::make_tuple(array(shard.indptr), array(shard.indices), array(shard.last_page_len));
}

void packbits_py(nb::handle x, nb::handle out, const std::string& bitorder, std::uintptr_t stream) {
  constexpr std::string_view op = "packbits";
  const TensorArg ax = tensor_arg(op, "x", x), ao = tensor_out(op, "out", out);
  const BitOrder order = bit_order_arg(op, bitorder);
  nb::gil_scoped_release release;
  packbits(ax.view, ao.view, order, as_stream(stream));
}

std::pair<nb::object, nb::object> segment_packbits_py(nb::handle x, nb::handle indptr,
                                                      const std::string& bitorder, std::uintptr_t stream) {
  constexpr std::string_view op = "segment_packbits";
  const TensorArg ax = tensor_arg(op, "x", x), ai = tensor_arg(op, "indptr", indptr);
  const BitOrder order = bit_order_arg(op, bitorder);
  SegmentPacked packed;
  {
    nb::gil_scoped_release release;
    packed = segment_packbits(ax.view, ai.view, order, as_stream(stream));
  }
  return {to_python(std::move(packed.data), x), to_python(std::move(packed.indptr), x)};
}

}  // namespace

void bind_ops(nb::module_& m) {
  using nb::arg;
  m.def("single_prefill", &single_prefill_py, arg("q"), arg("k"), arg("v"), arg("out"), arg("lse").none(),
        arg("custom_mask").none(), arg("causal"), arg("kv_layout"), arg("pos_encoding_mode"),
        arg("window_left"), arg("logits_soft_cap"), arg("sm_scale").none(), arg("rope_scale"),
        arg("rope_theta"), arg("k_scale"), arg("v_scale"), arg("backend"), arg("stream"),
        "kvinfer::single_prefill: q [qo_len, Hq, Dqk], k [kv_len, Hk, Dqk], v [kv_len, Hk, Dvo] (HND: heads "
        "first) -> out [qo_len, Hq, Dvo], lse float32 [qo_len, Hq] (base 2).");
  m.def("single_decode", &single_decode_py, arg("q"), arg("k"), arg("v"), arg("out"), arg("lse").none(),
        arg("kv_layout"), arg("pos_encoding_mode"), arg("window_left"), arg("logits_soft_cap"),
        arg("sm_scale").none(), arg("rope_scale"), arg("rope_theta"), arg("k_scale"), arg("v_scale"),
        arg("stream"),
        "kvinfer::single_decode: q [Hq, D], k/v [kv_len, Hk, D] -> out [Hq, D], lse float32 [Hq].");
  m.def("merge_state", &merge_state_py, arg("v_a"), arg("s_a"), arg("v_b"), arg("s_b"), arg("v_merged"),
        arg("s_merged"), arg("stream"), "kvinfer::merge_state: v [n, H, D], s float32 [n, H] (base-2 LSE).");
  m.def("merge_state_in_place", &merge_state_in_place_py, arg("v"), arg("s"), arg("v_other"), arg("s_other"),
        arg("mask").none(), arg("stream"), "kvinfer::merge_state_in_place; mask bool/uint8 [n] or None.");
  m.def("merge_states", &merge_states_py, arg("v"), arg("s"), arg("v_merged"), arg("s_merged"), arg("stream"),
        "kvinfer::merge_states: v [n, K, H, D], s [n, K, H] -> v_merged [n, H, D], s_merged [n, H].");
  m.def("append_paged_kv_cache", &append_paged_kv_cache_py, arg("append_key"), arg("append_value"),
        arg("batch_indices"), arg("positions"), arg("k_cache"), arg("v_cache").none(), arg("kv_indices"),
        arg("kv_indptr"), arg("kv_last_page_len"), arg("kv_layout"), arg("stream"),
        "kvinfer::append_paged_kv_cache; v_cache None: k_cache is the 5-D cache.");
  m.def("append_paged_mla_kv_cache", &append_paged_mla_kv_cache_py, arg("append_ckv"),
        arg("append_kpe").none(), arg("batch_indices"), arg("positions"), arg("ckv_cache"),
        arg("kpe_cache").none(), arg("kv_indices"), arg("kv_indptr"), arg("kv_last_page_len"), arg("stream"),
        "kvinfer::append_paged_mla_kv_cache; kpe_cache None: ckv_cache is the packed cache.");
  m.def("get_batch_indices_positions", &get_batch_indices_positions_py, arg("append_indptr"), arg("seq_lens"),
        arg("batch_indices"), arg("positions"), arg("stream"),
        "kvinfer::get_batch_indices_positions (int32).");
  m.def("get_seq_lens", &get_seq_lens_py, arg("kv_indptr"), arg("kv_last_page_len"), arg("page_size"),
        arg("seq_lens"), arg("stream"), "kvinfer::get_seq_lens (int32 [batch_size]).");
  m.def("shard_page_table", &shard_page_table_py, arg("kv_indptr"), arg("kv_indices"), arg("kv_last_page_len"),
        arg("page_size"), arg("rank"), arg("world"), arg("policy"),
        "kvinfer::shard_page_table: rank's (kv_indptr, kv_indices, kv_last_page_len) of a host page table.");
  m.def("packbits", &packbits_py, arg("x"), arg("out"), arg("bitorder"), arg("stream"),
        "kvinfer::packbits: x bool/uint8 [n] -> out uint8 [ceil(n / 8)].");
  m.def(
      "segment_packbits", &segment_packbits_py, arg("x"), arg("indptr"), arg("bitorder"), arg("stream"),
      "kvinfer::segment_packbits -> (packed uint8, byte indptr int32), on x's device and of x's framework.");
}

}  // namespace kvinfer::python
