// SPDX-License-Identifier: Apache-2.0
// Merging attention states. A state is (v, s): the attention output over a subset
// of keys and the base-2 log-sum-exp of their scores. Two states over disjoint key
// sets merge exactly into the state over their union:
//   m = max(s_a, s_b), w_a = 2^(s_a - m), w_b = 2^(s_b - m)
//   v = (w_a v_a + w_b v_b) / (w_a + w_b), s = m + log2(w_a + w_b)
// Two empty states (s = -inf) merge into v = 0, s = -inf.
#pragma once

#include "kvinfer/core/tensor.hpp"

namespace kvinfer {

// v_* [n, num_heads, head_dim] (f16, bf16 or f32, last dim contiguous), s_* [n, num_heads] f32.
void merge_state(const TensorView& v_a, const TensorView& s_a, const TensorView& v_b,
                 const TensorView& s_b, const TensorView& v_out, const TensorView& s_out,
                 Stream stream = nullptr);

// (v, s) <- merge((v, s), (v_other, s_other)) for rows whose mask entry is non-zero
// (mask: optional bool/uint8 [n]; absent means every row).
void merge_state_in_place(const TensorView& v, const TensorView& s, const TensorView& v_other,
                          const TensorView& s_other, const TensorView& mask = {},
                          Stream stream = nullptr);

// Merges K states per row: v [n, K, num_heads, head_dim], s [n, K, num_heads]
// into v_out [n, num_heads, head_dim], s_out [n, num_heads].
void merge_states(const TensorView& v, const TensorView& s, const TensorView& v_out,
                  const TensorView& s_out, Stream stream = nullptr);

}  // namespace kvinfer
