// SPDX-License-Identifier: Apache-2.0
// Attention masks: mode, and the 2-D ragged custom mask with its indptr.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvinfer/core/tensor.hpp"

namespace kvinfer {

enum class MaskMode {
  kNone,
  kCausal,  // bottom-right aligned: row i sees key j iff j <= i + kv_len - qo_len
  kCustom,  // a boolean block of qo_len x kv_len per request
};

enum class BitOrder {
  kBig,     // numpy's default: bit 7 of a byte is the first element
  kLittle,  // bit k of a byte is element 8 * byte + k; what attention uses
};

// Offsets of each request's block in a flattened 2-D ragged mask:
// element offsets (cumsum of qo_len * kv_len) or, packed, byte offsets with each
// request's block padded to a whole byte. Returns batch_size + 1 entries.
std::vector<std::int64_t> mask_indptr(std::span<const std::int32_t> qo_lens,
                                      std::span<const std::int32_t> kv_lens, bool packed);

}  // namespace kvinfer
