// SPDX-License-Identifier: Apache-2.0
// CPU backend of packbits / segment_packbits (numpy.packbits semantics).
#include <cstdint>

#include "cpu/backend.hpp"

namespace kvinfer::cpu {
namespace {

// Packs n bytes (non-zero = true) into ceil(n / 8) bytes; the last byte is padded
// with zero bits. Big: element 8i + k is bit 7 - k; little: bit k.
void pack(const std::uint8_t* x, std::int64_t n, std::uint8_t* out, BitOrder order) {
  const bool little = order == BitOrder::kLittle;
  for (std::int64_t i = 0; i < n; i += 8) {
    const std::int64_t count = n - i < 8 ? n - i : 8;
    std::uint8_t byte = 0;
    for (std::int64_t k = 0; k < count; ++k) {
      const std::uint8_t bit = x[i + k] != 0 ? 1 : 0;
      byte |= std::uint8_t(bit << (little ? k : 7 - k));
    }
    out[i / 8] = byte;
  }
}

}  // namespace

void CpuBackend::packbits(const detail::PackBitsParams& p) const {
  pack(p.x.data_as<const std::uint8_t>(), p.x.size(0), p.out.data_as<std::uint8_t>(), p.order);
}

void CpuBackend::segment_packbits(const detail::SegmentPackBitsParams& p) const {
  const auto* x = p.x.data_as<const std::uint8_t>();
  const auto* indptr = p.indptr.data_as<const std::int32_t>();
  const auto* out_indptr = p.out_indptr.data_as<const std::int32_t>();
  auto* out = p.out.data_as<std::uint8_t>();
  for (std::int64_t i = 0; i < p.batch_size; ++i) {
    pack(x + indptr[i], std::int64_t(indptr[i + 1]) - indptr[i], out + out_indptr[i], p.order);
  }
}

}  // namespace kvinfer::cpu
