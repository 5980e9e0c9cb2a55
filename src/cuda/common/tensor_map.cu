// SPDX-License-Identifier: Apache-2.0
#include "cuda/common/tensor_map.hpp"

#include <cuda_runtime.h>

#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's encoder, looked up once (CUDA 12.0's ABI of the function).
EncodeTiled encoder() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                                           &found);
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || f == nullptr) {
      throw Error("cuda", "driver", "cuTensorMapEncodeTiled",
                  "the CUDA driver does not provide the TMA descriptor encoder (a driver older than CUDA 12)");
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// Any rank: the checks of the header, then the driver's encoder.
template <int kRank>
bool encode_16bit(CUtensorMap& map, const void* data, const std::uint64_t (&dims)[kRank],
                  const std::uint64_t (&strides_bytes)[kRank - 1], const std::uint32_t (&box)[kRank]) {
  constexpr std::uint64_t kMaxStride = std::uint64_t(1) << 40, kMaxDim = std::uint64_t(1) << 32;
  if (reinterpret_cast<std::uintptr_t>(data) % 16 != 0) return false;
  for (const std::uint64_t s : strides_bytes)
    if (s % 16 != 0 || s == 0 || s >= kMaxStride) return false;
  for (const std::uint64_t d : dims)
    if (d == 0 || d > kMaxDim) return false;
  cuuint32_t element_strides[kRank];
  for (cuuint32_t& e : element_strides) e = 1;
  const CUresult r = encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, kRank, const_cast<void*>(data), dims,
                               strides_bytes, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

}  // namespace

bool encode_tensor_map_16bit_3d(CUtensorMap& map, const void* data, const std::uint64_t (&dims)[3],
                                const std::uint64_t (&strides_bytes)[2], const std::uint32_t (&box)[3]) {
  return encode_16bit<3>(map, data, dims, strides_bytes, box);
}

}  // namespace kvinfer::cuda
