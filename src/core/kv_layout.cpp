// SPDX-License-Identifier: Apache-2.0
// Names of the KV layouts, as FlashInfer spells them ("NHD", "HND").
#include "kvinfer/layout/kv_layout.hpp"

namespace kvinfer {

std::optional<KVLayout> parse_kv_layout(std::string_view name) {
  if (name == "NHD" || name == "nhd") return KVLayout::kNHD;
  if (name == "HND" || name == "hnd") return KVLayout::kHND;
  return std::nullopt;
}

}  // namespace kvinfer
