// SPDX-License-Identifier: Apache-2.0
#include "kvinfer/layout/page_table_shard.hpp"

#include <string>

#include "kvinfer/core/error.hpp"

namespace kvinfer {
namespace {

constexpr std::string_view kOp = "shard_page_table";

}  // namespace

PageTable PageTableShard::table() const {
  const auto view = [](const std::vector<std::int32_t>& v) {
    return TensorView(const_cast<std::int32_t*>(v.data()), DType::kI32, {std::int64_t(v.size())});
  };
  return {.indptr = view(indptr), .indices = view(indices), .last_page_len = view(last_page_len)};
}

std::vector<std::int32_t> PageTableShard::kv_lens(std::int64_t page_size) const {
  return kv_lens_from_page_table(kOp, table(), page_size, -1);
}

PageTableShard shard_page_table(const PageTable& table_host, std::int64_t page_size, int rank, int world,
                                ShardPolicy policy) {
  if (world < 1) throw Error(kOp, "world", std::to_string(world), "must be at least 1");
  if (rank < 0 || rank >= world) {
    throw Error(kOp, "rank", std::to_string(rank), "must be in [0, world = " + std::to_string(world) + ")");
  }
  if (policy != ShardPolicy::kContiguous && policy != ShardPolicy::kStriped) {
    throw Error(kOp, "policy", std::to_string(int(policy)), "must be kContiguous or kStriped");
  }
  validate_page_table_arrays(kOp, table_host, Device::cpu());
  kv_lens_from_page_table(kOp, table_host, page_size, -1);  // indptr, last_page_len and page_size checked
  const auto* indptr = table_host.indptr.data_as<const std::int32_t>();
  const auto* indices = table_host.indices.data_as<const std::int32_t>();
  const auto* last = table_host.last_page_len.data_as<const std::int32_t>();
  const std::int64_t batch = table_host.batch_size();
  PageTableShard s;
  s.indptr.reserve(std::size_t(batch) + 1);
  s.last_page_len.reserve(std::size_t(batch));
  s.indptr.push_back(0);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t first = indptr[b], n = std::int64_t(indptr[b + 1]) - first;
    bool holds_last = false;
    const auto take = [&](std::int64_t j) {
      s.indices.push_back(indices[first + j]);
      holds_last = j == n - 1;
    };
    if (policy == ShardPolicy::kContiguous) {
      for (std::int64_t j = n * rank / world; j < n * (rank + 1) / world; ++j) take(j);
    } else {
      for (std::int64_t j = rank; j < n; j += world) take(j);
    }
    const std::int64_t held = std::int64_t(s.indices.size()) - s.indptr.back();
    s.indptr.push_back(std::int32_t(s.indices.size()));
    s.last_page_len.push_back(held == 0 ? 0 : holds_last ? last[b] : std::int32_t(page_size));
  }
  return s;
}

}  // namespace kvinfer
