// SPDX-License-Identifier: Apache-2.0
// Python arrays as kvinfer::TensorView: any object with __dlpack__ or the buffer
// protocol (numpy, torch, CuPy, JAX) crosses through nanobind's ndarray without a copy.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer::python {

namespace nb = nanobind;

// Raised for FlashInfer arguments whose values kvinfer does not implement; Python's
// kvinfer.NotSupportedError (a kvinfer.Error and a NotImplementedError).
class NotSupported : public Error {
 public:
  using Error::Error;
};

// One converted tensor argument. `array` holds the DLPack export (and `source` the
// uint view made for a dtype DLPack cannot name) for as long as the view is used.
struct TensorArg {
  nb::ndarray<nb::ro> array;
  nb::object source;
  TensorView view;

  bool defined() const { return view.defined(); }
};

// Converts `obj` (None gives an absent view when `optional`). `hint` names the element
// type of raw storage: a uint16 array is read as hint when hint is float16/bfloat16, a
// uint8 array as hint when hint is an fp8 type (numpy has no bfloat16 or fp8 dtype of
// its own). Arrays whose dtype DLPack cannot carry (ml_dtypes.bfloat16,
// float8_e4m3fn, float8_e5m2) are viewed as uint16/uint8 without a copy and keep their
// own dtype. Throws kvinfer::Error naming `op` and `name`.
TensorArg tensor_arg(std::string_view op, std::string_view name, nb::handle obj,
                     std::optional<DType> hint = std::nullopt, bool optional = false);

// The same for an output: the array must be writable.
TensorArg tensor_out(std::string_view op, std::string_view name, nb::handle obj,
                     std::optional<DType> hint = std::nullopt, bool optional = false);

// The device of an array of any element type (a workspace buffer's).
Device device_arg(std::string_view op, std::string_view name, nb::handle obj);

// FlashInfer's dtype strings ("float16", "bfloat16", "float8_e4m3fn", "half", ...) and
// kvinfer's own names.
DType dtype_arg(std::string_view op, std::string_view name, std::string_view value);
KVLayout kv_layout_arg(std::string_view op, std::string_view value);
PosEncoding pos_encoding_arg(std::string_view op, std::string_view value);
BitOrder bit_order_arg(std::string_view op, std::string_view value);
// FlashInfer's backend names that kvinfer has: "auto", "fa2" (portable), "fa3" (Hopper).
PrefillBackend backend_arg(std::string_view op, std::string_view value);

// The options of an attention call or plan, in FlashInfer's terms.
AttentionOptions attention_options(std::string_view op, MaskMode mask, std::string_view pos_encoding_mode,
                                   int window_left, float logits_soft_cap, std::optional<float> sm_scale,
                                   float rope_scale, float rope_theta, std::string_view backend);
// FlashInfer's rule: a custom mask replaces causal.
inline MaskMode mask_mode(const TensorArg& custom_mask, bool causal) {
  return custom_mask.defined() ? MaskMode::kCustom : causal ? MaskMode::kCausal : MaskMode::kNone;
}

// A page table's arrays (FlashInfer's kv_indptr, kv_indices, kv_last_page_len): indptr
// and last_page_len read on the host, indices where run() reads them.
struct PageTableArg {
  TensorArg indptr, indices, last_page_len;

  PageTable table() const {
    return {.indptr = indptr.view, .indices = indices.view, .last_page_len = last_page_len.view};
  }
};
PageTableArg page_table_arg(std::string_view op, nb::handle indptr, nb::handle indices, nb::handle last_page_len);

// A paged cache: one 5-D tensor (v absent) or a (k, v) pair.
inline PagedKVCache paged_cache(const TensorArg& k, const TensorArg& v, KVLayout layout) {
  return v.defined() ? PagedKVCache::pair(k.view, v.view, layout) : PagedKVCache::combined(k.view, layout);
}

// A device-resident kvinfer::Tensor handed to Python: numpy on the CPU, torch (through
// DLPack) when `like` is a torch tensor.
nb::object to_python(Tensor t, nb::handle like);

inline Stream as_stream(std::uintptr_t s) {
  return reinterpret_cast<Stream>(s);
}

}  // namespace kvinfer::python
