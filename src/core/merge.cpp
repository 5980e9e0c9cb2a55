// SPDX-License-Identifier: Apache-2.0
// Public entry points of the attention-state merges (merge_state,
// merge_state_in_place, merge_states): validate, then run on the device of the data.
// A cascade's run() merges through these: their checks format messages only on
// failure, so that they allocate nothing.
#include "kvinfer/ops/merge.hpp"

#include <fmt/format.h>

#include <array>
#include <initializer_list>

#include "backend/backend.hpp"
#include "core/check.hpp"
#include "core/op_params.hpp"

namespace kvinfer {
namespace {

// The first value tensor fixes dtype, device and [n, H, D]: f16, bf16 or f32.
void check_first_values(std::string_view op, std::string_view arg, const TensorView& v, int rank) {
  detail::check_rank(op, arg, v, rank);
  const DType t = v.dtype();
  if (t != DType::kF16 && t != DType::kBF16 && t != DType::kF32) {
    detail::fail(op, fmt::format("{}.dtype", arg), dtype_name(t),
                 "attention states must be float16, bfloat16 or float32");
  }
  detail::check_last_dim_contiguous(op, arg, v);
  if (v.size(-1) < 1) {
    detail::fail(op, fmt::format("{}.shape[{}]", arg, rank - 1), std::to_string(v.size(-1)),
                 "head_dim must be >= 1");
  }
}

// Another tensor that must match `ref` (named `ref_arg`) in shape, and the given
// dtype and device.
void check_like(std::string_view op, std::string_view arg, const TensorView& t, const TensorView& ref,
                std::string_view ref_arg, DType dtype, Device device) {
  detail::check_rank(op, arg, t, ref.rank());
  if (t.dtype() != dtype) {
    detail::fail(op, fmt::format("{}.dtype", arg), dtype_name(t.dtype()),
                 fmt::format("must be {} (as {})", dtype_name(dtype), ref_arg));
  }
  detail::check_device(op, arg, t, device);
  detail::check_last_dim_contiguous(op, arg, t);
  for (int d = 0; d < ref.rank(); ++d) {
    detail::check_size(op, arg, t, d, ref.size(d), detail::later("{}.shape[{}]", ref_arg, d));
  }
}

// An LSE tensor: float32 with the given sizes, on `device`.
void check_lse(std::string_view op, std::string_view arg, const TensorView& s,
               std::initializer_list<std::int64_t> sizes, std::string_view values_arg, Device device) {
  detail::check_rank(op, arg, s, int(sizes.size()));
  detail::check_dtype(op, arg, s, DType::kF32);
  detail::check_device(op, arg, s, device);
  detail::check_last_dim_contiguous(op, arg, s);
  int d = 0;
  for (std::int64_t want : sizes) {
    detail::check_size(op, arg, s, d, want, detail::later("{}.shape[{}]", values_arg, d));
    ++d;
  }
}

void run(const detail::MergeStateParams& p, Device device) {
  detail::backend_for(device).merge_state(p);
}

// Validates two states and an output (v_out may be v_a: the in-place form).
void validate_pair(std::string_view op, const detail::MergeStateParams& p,
                   const std::array<std::string_view, 6>& names, std::string_view mask_name) {
  const auto& [va, sa, vb, sb, vo, so] = names;
  check_first_values(op, va, p.v_a, 3);
  const Device device = p.v_a.device();
  const DType dtype = p.v_a.dtype();
  const std::int64_t n = p.v_a.size(0), h = p.v_a.size(1);
  check_lse(op, sa, p.s_a, {n, h}, va, device);
  check_like(op, vb, p.v_b, p.v_a, va, dtype, device);
  check_lse(op, sb, p.s_b, {n, h}, va, device);
  check_like(op, vo, p.v_out, p.v_a, va, dtype, device);
  check_lse(op, so, p.s_out, {n, h}, va, device);
  if (p.mask.defined()) {
    detail::check_rank(op, mask_name, p.mask, 1);
    if (p.mask.dtype() != DType::kBool && p.mask.dtype() != DType::kU8) {
      detail::fail(op, fmt::format("{}.dtype", mask_name), dtype_name(p.mask.dtype()),
                   "a row mask must be bool or uint8");
    }
    detail::check_device(op, mask_name, p.mask, device);
    detail::check_last_dim_contiguous(op, mask_name, p.mask);
    detail::check_size(op, mask_name, p.mask, 0, n, detail::later("n, {}.shape[0]", va));
  }
  detail::check_backend_built(op, va, device);
}

}  // namespace

void merge_state(const TensorView& v_a, const TensorView& s_a, const TensorView& v_b, const TensorView& s_b,
                 const TensorView& v_out, const TensorView& s_out, Stream stream) {
  constexpr std::string_view op = "merge_state";
  const detail::MergeStateParams p{v_a, s_a, v_b, s_b, v_out, s_out, TensorView(), stream};
  validate_pair(op, p, {"v_a", "s_a", "v_b", "s_b", "v_out", "s_out"}, "mask");
  if (v_a.size(0) == 0 || v_a.size(1) == 0) return;
  run(p, v_a.device());
}

void merge_state_in_place(const TensorView& v, const TensorView& s, const TensorView& v_other,
                          const TensorView& s_other, const TensorView& mask, Stream stream) {
  constexpr std::string_view op = "merge_state_in_place";
  const detail::MergeStateParams p{v, s, v_other, s_other, v, s, mask, stream};
  validate_pair(op, p, {"v", "s", "v_other", "s_other", "v", "s"}, "mask");
  if (v.size(0) == 0 || v.size(1) == 0) return;
  run(p, v.device());
}

void merge_states(const TensorView& v, const TensorView& s, const TensorView& v_out, const TensorView& s_out,
                  Stream stream) {
  constexpr std::string_view op = "merge_states";
  check_first_values(op, "v", v, 4);
  const Device device = v.device();
  const std::int64_t n = v.size(0), k = v.size(1), h = v.size(2), d = v.size(3);
  detail::require_v(k >= 1, op, "v.shape[1]", k, "the number of states K must be >= 1");
  check_lse(op, "s", s, {n, k, h}, "v", device);
  detail::check_rank(op, "v_out", v_out, 3);
  if (v_out.dtype() != v.dtype()) {
    detail::fail(op, "v_out.dtype", dtype_name(v_out.dtype()),
                 fmt::format("must be {} (as v)", dtype_name(v.dtype())));
  }
  detail::check_device(op, "v_out", v_out, device);
  detail::check_last_dim_contiguous(op, "v_out", v_out);
  detail::check_size(op, "v_out", v_out, 0, n, "v.shape[0]");
  detail::check_size(op, "v_out", v_out, 1, h, "v.shape[2]");
  detail::check_size(op, "v_out", v_out, 2, d, "v.shape[3]");
  check_lse(op, "s_out", s_out, {n, h}, "v_out", device);
  detail::check_backend_built(op, "v", device);
  if (n == 0 || h == 0) return;

  const detail::MergeStatesParams p{v, s, v_out, s_out, stream};
  detail::backend_for(device).merge_states(p);
}

}  // namespace kvinfer
