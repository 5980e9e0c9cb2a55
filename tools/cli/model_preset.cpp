// SPDX-License-Identifier: Apache-2.0
#include "model_preset.hpp"

#include <fmt/format.h>

#include <cmath>

#include "input_error.hpp"

namespace kvinfer::cli {
namespace {

struct Preset {
  ModelShape shape;
  std::string summary;
};

ModelShape gqa(const char* name, int layers, int hq, int hk, int d) {
  return {.name = name, .num_layers = layers, .num_qo_heads = hq, .num_kv_heads = hk, .head_dim = d};
}

ModelShape mla(const char* name, int layers, int heads) {
  return {.name = name, .kind = AttentionKind::kMla, .num_layers = layers, .num_qo_heads = heads, .num_kv_heads = 1,
          .head_dim_ckv = 512, .head_dim_kpe = 64};
}

// `tiny` is the default: llama3-8b's head layout (group of 4, d 128) with few layers
// and heads, so that a whole serving run takes seconds on two CPU cores.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> p{
      {gqa("tiny", 4, 16, 4, 128), "4 layers, 16 q / 4 kv heads, d 128 (llama3-8b's heads, scaled down)"},
      {gqa("llama3-8b", 32, 32, 8, 128), "32 layers, 32 q / 8 kv heads, d 128"},
      {gqa("llama3-70b", 80, 64, 8, 128), "80 layers, 64 q / 8 kv heads, d 128"},
      {gqa("llama2-7b", 32, 32, 32, 128), "32 layers, 32 heads (MHA), d 128"},
      {gqa("gemma2-9b", 42, 16, 8, 256), "42 layers, 16 q / 8 kv heads, d 256"},
      {mla("mla-tiny", 2, 16), "MLA, 2 layers, 16 heads, ckv 512 + kpe 64 (DeepSeek's cache, scaled down)"},
      {mla("deepseek-v3", 61, 128), "MLA, 61 layers, 128 heads, ckv 512 + kpe 64"},
  };
  return p;
}

DType parse_float_dtype(const std::string& flag, const std::string& name, bool allow_fp8) {
  const std::optional<DType> t = parse_dtype(name);
  const bool ok = t && (is_half(*t) || (allow_fp8 && is_fp8(*t)));
  if (!ok) {
    throw InputError(fmt::format("{} = {}: must be {}", flag, name,
                                 allow_fp8 ? "f16, bf16, e4m3 or e5m2" : "f16 or bf16"));
  }
  return *t;
}

}  // namespace

std::int64_t ModelShape::kv_bytes_per_token_layer() const {
  const auto elem = std::int64_t(dtype_size(kv_dtype));
  if (kind == AttentionKind::kMla) return std::int64_t(head_dim_ckv + head_dim_kpe) * elem;
  return 2 * std::int64_t(num_kv_heads) * head_dim * elem;
}

float ModelShape::sm_scale() const {
  if (kind == AttentionKind::kMla) return 1.0f / std::sqrt(128.0f + float(head_dim_kpe));
  return 1.0f / std::sqrt(float(head_dim));
}

std::string ModelShape::describe() const {
  if (kind == AttentionKind::kMla) {
    return fmt::format("{}: MLA, {} layers, {} heads, ckv {} + kpe {}, {} KV", name, num_layers, num_qo_heads,
                       head_dim_ckv, head_dim_kpe, dtype_name(kv_dtype));
  }
  return fmt::format("{}: {} layers, {} q / {} kv heads, d {}, {} KV", name, num_layers, num_qo_heads,
                     num_kv_heads, head_dim, dtype_name(kv_dtype));
}

std::vector<ModelPresetInfo> model_presets() {
  std::vector<ModelPresetInfo> out;
  for (const Preset& p : presets()) out.push_back({p.shape.name, p.summary});
  return out;
}

ModelShape make_model(const std::string& preset, const ModelOverrides& o) {
  const Preset* found = nullptr;
  std::string names;
  for (const Preset& p : presets()) {
    if (p.shape.name == preset) found = &p;
    names += (names.empty() ? "" : ", ") + p.shape.name;
  }
  if (found == nullptr)
    throw InputError(fmt::format("--preset = {}: unknown preset (known: {})", preset, names));
  ModelShape m = found->shape;
  const bool is_mla = m.kind == AttentionKind::kMla;
  if (o.num_layers) m.num_layers = *o.num_layers;
  if (o.num_qo_heads) m.num_qo_heads = *o.num_qo_heads;
  if (o.num_kv_heads) {
    if (is_mla)
      throw InputError(
          fmt::format("--kv-heads: {} is an MLA model, whose heads share one latent KV", m.name));
    m.num_kv_heads = *o.num_kv_heads;
  }
  if (o.head_dim) {
    if (is_mla) throw InputError(fmt::format("--head-dim: {} is an MLA model (ckv 512 + kpe 64)", m.name));
    m.head_dim = *o.head_dim;
  }
  if (o.q_dtype) m.q_dtype = parse_float_dtype("--dtype", *o.q_dtype, false);
  if (o.kv_dtype) m.kv_dtype = parse_float_dtype("--kv-dtype", *o.kv_dtype, true);

  if (m.num_layers < 1 || m.num_layers > 1024) {
    throw InputError(fmt::format("--layers = {}: must be in [1, 1024]", m.num_layers));
  }
  if (m.num_qo_heads < 1 || m.num_qo_heads > 1024) {
    throw InputError(fmt::format("--qo-heads = {}: must be in [1, 1024]", m.num_qo_heads));
  }
  if (!is_mla) {
    if (m.num_kv_heads < 1)
      throw InputError(fmt::format("--kv-heads = {}: must be at least 1", m.num_kv_heads));
    if (m.num_qo_heads % m.num_kv_heads != 0) {
      throw InputError(
          fmt::format("--qo-heads = {} with --kv-heads = {}: query heads must be a multiple of kv heads",
                      m.num_qo_heads, m.num_kv_heads));
    }
    if (m.head_dim < 16 || m.head_dim > 512 || m.head_dim % 16 != 0) {
      throw InputError(fmt::format("--head-dim = {}: must be a multiple of 16 in [16, 512]", m.head_dim));
    }
  }
  return m;
}

}  // namespace kvinfer::cli
