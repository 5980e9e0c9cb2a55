// SPDX-License-Identifier: Apache-2.0
// Bit-packing of boolean masks (numpy.packbits semantics, both bit orders), whole
// arrays and per-segment (each segment padded to a whole byte, byte offsets given).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/backend.hpp"
#include "cuda/common/launch.cuh"

namespace kvinfer::cuda {
namespace {

constexpr int kThreads = 256;

// Eight mask bytes (element k in byte k, little-endian) to one packed byte with
// bit k = (element k != 0), i.e. little bit order.
__host__ __device__ __forceinline__ std::uint32_t pack8_little(std::uint64_t x) {
  // Fold each byte onto its lowest bit: 1 iff the byte is non-zero.
  x |= x >> 4;
  x |= x >> 2;
  x |= x >> 1;
  x &= 0x0101010101010101ull;
  // The multiply moves bit 0 of byte k to bit 56 + k; the partial products that land
  // below bit 56 occupy distinct bits, so no carry reaches the result.
  return std::uint32_t((x * 0x0102040810204080ull) >> 56);
}

__device__ __forceinline__ std::uint32_t order_bits(std::uint32_t little, bool big) {
  // Big order puts element 0 in bit 7: the bit reversal of the little byte.
  return big ? (__brev(little) >> 24) : little;
}

// Up to 8 elements from an arbitrary (unaligned) address; missing ones are false.
__device__ __forceinline__ std::uint64_t load_bytes(const std::uint8_t* x, std::int64_t count) {
  std::uint64_t v = 0;
  for (int k = 0; k < 8; ++k) {
    if (k < count) v |= std::uint64_t(__ldg(x + k) != 0) << (8 * k);
  }
  return v;
}

// One output byte per thread. kAligned: x is 8-byte aligned, so every full byte's
// eight elements come in one 8-byte load.
template <bool kAligned>
__global__ void __launch_bounds__(kThreads)
    packbits_kernel(const std::uint8_t* __restrict__ x,  // [n]
                    std::int64_t n, bool big,
                    std::uint8_t* __restrict__ out) {  // [ceil(n / 8)]
  const std::int64_t num_bytes = (n + 7) / 8;
  for (std::int64_t i = blockIdx.x * std::int64_t(kThreads) + threadIdx.x; i < num_bytes;
       i += std::int64_t(gridDim.x) * kThreads) {
    const std::int64_t start = 8 * i;
    std::uint64_t v;
    if (kAligned && start + 8 <= n) {
      v = __ldg(reinterpret_cast<const unsigned long long*>(x + start));
    } else {
      v = load_bytes(x + start, n - start);
    }
    out[i] = std::uint8_t(order_bits(pack8_little(v), big));
  }
}

// One output byte per thread; its segment comes from a binary search of the byte
// indptr (a segment's bytes are contiguous and segments may be empty).
__global__ void __launch_bounds__(kThreads)
    segment_packbits_kernel(const std::uint8_t* __restrict__ x,           // [indptr[batch_size]]
                            const std::int32_t* __restrict__ indptr,      // [batch_size + 1] elements
                            const std::int32_t* __restrict__ out_indptr,  // [batch_size + 1] bytes
                            std::int32_t batch_size, std::int64_t num_bytes, bool big,
                            std::uint8_t* __restrict__ out) {  // [num_bytes]
  for (std::int64_t i = blockIdx.x * std::int64_t(kThreads) + threadIdx.x; i < num_bytes;
       i += std::int64_t(gridDim.x) * kThreads) {
    // Largest b with out_indptr[b] <= i; out_indptr[batch_size] = num_bytes > i.
    std::int32_t lo = 0, hi = batch_size;  // invariant: out_indptr[lo] <= i < out_indptr[hi]
    while (hi - lo > 1) {
      const std::int32_t mid = lo + (hi - lo) / 2;
      if (__ldg(out_indptr + mid) <= i) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const std::int64_t start = std::int64_t(__ldg(indptr + lo)) + 8 * (i - __ldg(out_indptr + lo));
    const std::int64_t count = std::int64_t(__ldg(indptr + lo + 1)) - start;
    const std::uint8_t* src = x + start;
    std::uint64_t v;
    if (count >= 8 && (reinterpret_cast<std::uintptr_t>(src) & 7) == 0) {
      v = __ldg(reinterpret_cast<const unsigned long long*>(src));
    } else {
      v = load_bytes(src, count);
    }
    out[i] = std::uint8_t(order_bits(pack8_little(v), big));
  }
}

}  // namespace

void CudaBackend::packbits(const detail::PackBitsParams& p) const {
  const std::int64_t n = p.x.size(0);
  if (n == 0) return;
  const auto* x = p.x.data_as<const std::uint8_t>();
  const bool big = p.order == BitOrder::kBig;
  const unsigned grid = grid_for((n + 7) / 8, kThreads, 1 << 20);
  const cudaStream_t s = to_cuda_stream(p.stream);
  if ((reinterpret_cast<std::uintptr_t>(x) & 7) == 0) {
    packbits_kernel<true><<<grid, kThreads, 0, s>>>(x, n, big, p.out.data_as<std::uint8_t>());
  } else {
    packbits_kernel<false><<<grid, kThreads, 0, s>>>(x, n, big, p.out.data_as<std::uint8_t>());
  }
  KVINFER_CUDA_CHECK_LAUNCH();
}

// The byte indptr (out_indptr) is computed by the caller on the host, since it sizes
// `out`; here it is only read, so this launch needs no synchronisation.
void CudaBackend::segment_packbits(const detail::SegmentPackBitsParams& p) const {
  const std::int64_t num_bytes = p.out.size(0);
  if (p.batch_size == 0 || num_bytes == 0) return;
  segment_packbits_kernel<<<grid_for(num_bytes, kThreads, 1 << 20), kThreads, 0, to_cuda_stream(p.stream)>>>(
      p.x.data_as<const std::uint8_t>(), p.indptr.data_as<const std::int32_t>(),
      p.out_indptr.data_as<const std::int32_t>(), std::int32_t(p.batch_size), num_bytes,
      p.order == BitOrder::kBig, p.out.data_as<std::uint8_t>());
  KVINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace kvinfer::cuda
