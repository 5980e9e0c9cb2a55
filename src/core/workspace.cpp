// SPDX-License-Identifier: Apache-2.0
#include "core/workspace.hpp"

#include <cstring>

#include "core/check.hpp"
#ifdef KVINFER_WITH_CUDA
#include "cuda/runtime.hpp"
#endif

namespace kvinfer::detail {

namespace {

// The schedule's arrays at their workspace offsets (bytes between them are unused).
void write_schedule(const Schedule& s, std::int64_t batch_size, std::int64_t nnz_q, std::uint8_t* dst) {
  const WorkspaceLayout& l = s.layout;
  std::memcpy(dst + l.requests, s.requests.data(), s.requests.size() * sizeof(RequestInfo));
  std::memcpy(dst + l.items, s.items.data(), s.items.size() * sizeof(WorkItem));
  const WorkItem unused{.request = kUnusedItem};
  for (auto i = std::int64_t(s.items.size()); i < s.max_items; ++i) {
    std::memcpy(dst + l.items + std::size_t(i) * sizeof(WorkItem), &unused, sizeof(WorkItem));
  }
  std::memcpy(dst + l.merge_tokens, s.merge_tokens.data(), s.merge_tokens.size() * sizeof(MergeToken));
  const std::int32_t counts[4] = {std::int32_t(s.items.size()), std::int32_t(s.merge_tokens.size()),
                                  std::int32_t(batch_size), std::int32_t(nnz_q)};
  std::memcpy(dst + l.counts, counts, sizeof(counts));
}

}  // namespace

void PlanWorkspace::upload(std::string_view op, const Schedule& s, std::int64_t batch_size, std::int64_t nnz_q) {
  const WorkspaceLayout& l = s.layout;
  const auto grow = [&](Tensor& buffer, std::size_t bytes, std::string_view what) {
    if (buffer.defined() && buffer.nbytes() >= bytes) return;
    require(!fixed_ || !buffer.defined(), op, "capacity", what, "a fixed-capacity plan must not grow its workspace");
    buffer = Tensor::empty({std::int64_t(std::max<std::size_t>(bytes, 4))}, DType::kU8, device_);
  };
  grow(int_buffer_, l.int_bytes, "int workspace");
  grow(float_buffer_, l.float_bytes, "float workspace");

  // The CPU reads the schedule where it is written; a GPU gets it through a host
  // staging buffer kept across plans, in one copy.
  if (device_.is_cpu()) {
    write_schedule(s, batch_size, nnz_q, int_buffer_.data_as<std::uint8_t>());
    return;
  }
  if (!staging_.defined() || staging_.nbytes() < l.int_bytes) {
    staging_ = Tensor::empty({std::int64_t(int_buffer_.nbytes())}, DType::kU8);
  }
  write_schedule(s, batch_size, nnz_q, staging_.data_as<std::uint8_t>());
  copy(int_buffer_.view().slice(0, 0, std::int64_t(l.int_bytes)), staging_.view().slice(0, 0, std::int64_t(l.int_bytes)));
#ifdef KVINFER_WITH_CUDA
  cuda::stream_synchronize(nullptr);  // the staging buffer is rewritten by the next plan
#endif
}

ScheduleView PlanWorkspace::view(const WorkspaceLayout& l) const {
  const auto* ws = int_buffer_.data_as<const std::uint8_t>();
  auto* fws = float_buffer_.data_as<std::uint8_t>();
  return {reinterpret_cast<const RequestInfo*>(ws + l.requests),
          reinterpret_cast<const WorkItem*>(ws + l.items),
          reinterpret_cast<const MergeToken*>(ws + l.merge_tokens),
          reinterpret_cast<const std::int32_t*>(ws + l.counts),
          reinterpret_cast<float*>(fws + l.partial_o),
          reinterpret_cast<float*>(fws + l.partial_lse)};
}

}  // namespace kvinfer::detail
