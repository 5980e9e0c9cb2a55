// SPDX-License-Identifier: Apache-2.0
// Tensor maps (TMA descriptors) built on the host for the kernels' bulk tensor copies
// (tma.cuh). The encoder is the driver's cuTensorMapEncodeTiled, found through the
// runtime's driver entry point so that the library links the runtime only.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace kvinfer::cuda {

// A 3-D tensor of 16-bit elements: extents dims[0] (contiguous), dims[1], dims[2], the
// byte strides of dims 1 and 2, copied in boxes of box[0] x box[1] x box[2] elements
// with the 128-byte swizzle (box[0] * 2 <= 128 bytes) and zeros outside the tensor.
// False where the tensor is outside what TMA addresses (a stride not a multiple of 16
// bytes or past 2^40, an extent past 2^32, an address not 16-byte aligned): the caller
// then copies another way.
bool encode_tensor_map_16bit_3d(CUtensorMap& map, const void* data, const std::uint64_t (&dims)[3],
                                const std::uint64_t (&strides_bytes)[2], const std::uint32_t (&box)[3]);

}  // namespace kvinfer::cuda
