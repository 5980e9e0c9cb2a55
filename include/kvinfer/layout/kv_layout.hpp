// SPDX-License-Identifier: Apache-2.0
// NHD / HND: the order of the last three dims of a KV tensor. Always explicit,
// never inferred from shapes ([P, 8, 8, 128] is ambiguous when page_size == heads).
#pragma once

#include <optional>
#include <string_view>

namespace kvinfer {

enum class KVLayout {
  kNHD,  // (seq, heads, dim)
  kHND,  // (heads, seq, dim)
};

constexpr std::string_view kv_layout_name(KVLayout l) { return l == KVLayout::kNHD ? "NHD" : "HND"; }
std::optional<KVLayout> parse_kv_layout(std::string_view name);

}  // namespace kvinfer
