// SPDX-License-Identifier: Apache-2.0
// The MLA paged cache: per token a compressed latent (ckv, 512 wide) and a
// rotary part (kpe, 64 wide, or absent); no heads dimension.
#pragma once

#include <cstdint>
#include <string_view>

#include "kvinfer/core/tensor.hpp"

namespace kvinfer {

inline constexpr std::int64_t kMlaHeadDimCkv = 512;
inline constexpr std::int64_t kMlaHeadDimKpe = 64;

struct MLACache {
  TensorView ckv;  // [max_pages, page_size, head_dim_ckv]
  TensorView kpe;  // [max_pages, page_size, head_dim_kpe]; absent when head_dim_kpe == 0

  // Views of one [max_pages, page_size, head_dim_ckv + head_dim_kpe] tensor, without copying.
  static MLACache combined(const TensorView& cache, std::int64_t head_dim_ckv = kMlaHeadDimCkv);
  static MLACache pair(const TensorView& ckv, const TensorView& kpe);

  std::int64_t num_pages() const { return ckv.size(0); }
  std::int64_t page_size() const { return ckv.size(1); }
  std::int64_t head_dim_ckv() const { return ckv.size(2); }
  std::int64_t head_dim_kpe() const { return kpe.defined() ? kpe.size(2) : 0; }
};

void validate_mla_cache(std::string_view op, const MLACache& cache);

}  // namespace kvinfer
