// SPDX-License-Identifier: Apache-2.0
// Model shapes for `kvinfer serve`: the attention-relevant part of a model (layers,
// heads, head dims, dtypes), from named presets and flags.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kvinfer/core/dtype.hpp"

namespace kvinfer::cli {

enum class AttentionKind {
  kGqa,  // grouped-query attention over a paged K/V cache (MHA when heads are equal)
  kMla,  // multi-head latent attention over a paged ckv/kpe cache (DeepSeek)
};

struct ModelShape {
  std::string name;
  AttentionKind kind = AttentionKind::kGqa;
  int num_layers = 0;
  int num_qo_heads = 0;
  int num_kv_heads = 0;          // GQA; MLA has one latent KV shared by all heads
  int head_dim = 0;              // GQA
  int head_dim_ckv = 0;          // MLA
  int head_dim_kpe = 0;          // MLA
  DType q_dtype = DType::kBF16;  // q and o
  DType kv_dtype = DType::kBF16;

  int group_size() const { return num_qo_heads / num_kv_heads; }
  // Bytes of K and V (or ckv and kpe) one token keeps in one layer's cache.
  std::int64_t kv_bytes_per_token_layer() const;
  // Scale of the logits: 1/sqrt(head_dim), for MLA 1/sqrt(128 + head_dim_kpe) as
  // DeepSeek (the absorbed up-projection leaves the cache's width out of it).
  float sm_scale() const;
  std::string describe() const;  // "llama3-8b: 32 layers, 32 q / 8 kv heads, d 128, bf16 KV"
};

struct ModelPresetInfo {
  std::string name;
  std::string summary;
};
std::vector<ModelPresetInfo> model_presets();

// Flags that override a preset's fields.
struct ModelOverrides {
  std::optional<int> num_layers, num_qo_heads, num_kv_heads, head_dim;
  std::optional<std::string> q_dtype, kv_dtype;
};

// The preset with the overrides applied and checked; throws InputError for an
// unknown preset or a shape the library cannot attend.
ModelShape make_model(const std::string& preset, const ModelOverrides& overrides);

}  // namespace kvinfer::cli
