// SPDX-License-Identifier: Apache-2.0
// The mask of an attention kernel: causal (bottom-right aligned), a sliding window to
// the left, or a request's packed custom bits (RequestInfo::mask_offset), as the
// problem's MaskMode says.
#pragma once

#include <cstdint>

#include "core/attention_params.hpp"

namespace kvinfer::cuda {

struct Mask {
  bool causal = false;
  std::int32_t window_left = -1;              // -1: no window
  const std::uint8_t* custom_bits = nullptr;  // packed bits, little order, or null
};

inline Mask mask_of(const detail::AttentionParams& p) {
  const detail::AttentionProblem& pr = p.problem;
  return {pr.mask_mode == MaskMode::kCausal, pr.window_left,
          pr.mask_mode == MaskMode::kCustom ? p.custom_mask : nullptr};
}

}  // namespace kvinfer::cuda
