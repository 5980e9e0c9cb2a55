// SPDX-License-Identifier: Apache-2.0
// Bit-packing of boolean masks, as numpy.packbits (default bit order "big";
// attention masks use "little").
#pragma once

#include <cstdint>

#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/mask.hpp"

namespace kvinfer {

// Bytes needed for n elements: ceil(n / 8).
constexpr std::int64_t packed_size(std::int64_t n) { return (n + 7) / 8; }

// Packs x (1-D, bool or uint8; non-zero is true) into out (uint8 [packed_size(n)]).
void packbits(const TensorView& x, const TensorView& out, BitOrder order = BitOrder::kBig,
              Stream stream = nullptr);
// Allocating form: the result lives on x's device.
Tensor packbits(const TensorView& x, BitOrder order = BitOrder::kBig, Stream stream = nullptr);

// Packs each segment x[indptr[i]:indptr[i+1]] separately, each padded to a whole
// byte. Returns the packed bytes and their byte indptr (int32 [batch_size + 1]) on
// x's device. `indptr` is int32; when it lives on a GPU it is copied to the host
// (one synchronisation), since the output size depends on it.
struct SegmentPacked {
  Tensor data;    // uint8 [indptr_out[batch_size]]
  Tensor indptr;  // int32 [batch_size + 1], byte offsets
};
SegmentPacked segment_packbits(const TensorView& x, const TensorView& indptr,
                               BitOrder order = BitOrder::kBig, Stream stream = nullptr);

}  // namespace kvinfer
