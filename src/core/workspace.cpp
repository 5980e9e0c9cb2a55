// SPDX-License-Identifier: Apache-2.0
#include "core/workspace.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "backend/backend.hpp"
#include "core/check.hpp"

namespace kvinfer::detail {

namespace {

std::size_t bytes_of(const TensorView& t) {
  return std::size_t(t.numel()) * t.element_size();
}

// A caller's buffer (absent: the plan's own, which grows) must hold `need` bytes.
void require_fits(std::string_view op, std::string_view name, const TensorView& buffer, std::size_t need,
                std::string_view field) {
  if (!buffer.defined() || bytes_of(buffer) >= need) return;
  fail(op, name, fmt::format("{} bytes", bytes_of(buffer)),
       fmt::format("the plan needs {} bytes (workspace_size().{})", need, field));
}

// memcpy of `bytes` from `src`: an empty array's data() may be null, which memcpy
// must not be given even with a size of 0.
void copy_bytes(std::uint8_t* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

// The schedule's arrays at their workspace offsets (bytes between them are unused).
void write_schedule(const Schedule& s, std::int64_t batch_size, std::int64_t nnz_q, std::uint8_t* dst) {
  const WorkspaceLayout& l = s.layout;
  copy_bytes(dst + l.requests, s.requests.data(), s.requests.size() * sizeof(RequestInfo));
  copy_bytes(dst + l.items, s.items.data(), s.items.size() * sizeof(WorkItem));
  const WorkItem unused{.request = kUnusedItem};
  for (auto i = std::int64_t(s.items.size()); i < s.max_items; ++i) {
    std::memcpy(dst + l.items + std::size_t(i) * sizeof(WorkItem), &unused, sizeof(WorkItem));
  }
  copy_bytes(dst + l.merge_tokens, s.merge_tokens.data(), s.merge_tokens.size() * sizeof(MergeToken));
  const std::int32_t counts[4] = {std::int32_t(s.items.size()), std::int32_t(s.merge_tokens.size()),
                                  std::int32_t(batch_size), std::int32_t(nnz_q)};
  std::memcpy(dst + l.counts, counts, sizeof(counts));
  const DeviceStatus clear{};
  std::memcpy(dst + l.status, &clear, sizeof(clear));
}

}  // namespace

bool PlanWorkspace::use_buffers(std::string_view op, const TensorView& float_buffer,
                                const TensorView& int_buffer, const WorkspaceLayout* current) {
  for (auto [name, t] :
       {std::pair{"float_workspace_buffer", &float_buffer}, std::pair{"int_workspace_buffer", &int_buffer}}) {
    if (!t->defined()) continue;
    check_device(op, name, *t, device_);
    require(t->is_contiguous(), op, name, t->describe(), "must be contiguous");
    require(reinterpret_cast<std::uintptr_t>(t->data()) % kWorkspaceAlign == 0, op, name, t->describe(),
            fmt::format("must be {}-byte aligned", kWorkspaceAlign));
  }
  if (current) {  // the plan in place must fit, or nothing changes
    require_fits(op, "float_workspace_buffer", float_buffer, current->float_bytes, "float_bytes");
    require_fits(op, "int_workspace_buffer", int_buffer, current->int_bytes, "int_bytes");
  }
  const bool int_changed =
      int_buffer.data() != caller_int_.data() || bytes_of(int_buffer) != bytes_of(caller_int_);
  caller_float_ = float_buffer;
  caller_int_ = int_buffer;
  return int_changed;
}

void PlanWorkspace::check_fits(std::string_view op, const WorkspaceLayout& l) const {
  require_fits(op, "float_workspace_buffer", caller_float_, l.float_bytes, "float_bytes");
  require_fits(op, "int_workspace_buffer", caller_int_, l.int_bytes, "int_bytes");
  const auto fixed_fits = [&](const TensorView& caller, const Tensor& own, std::size_t bytes, std::string_view what) {
    if (caller.defined() || !fixed_ || !own.defined() || own.nbytes() >= bytes) return;
    fail(op, "capacity", what,
         fmt::format("a fixed-capacity plan must not grow its workspace ({} bytes needed, {} allocated)", bytes,
                     own.nbytes()));
  };
  fixed_fits(caller_int_, int_buffer_, l.int_bytes, "int workspace");
  fixed_fits(caller_float_, float_buffer_, l.float_bytes, "float workspace");
}

void PlanWorkspace::upload(std::string_view op, const Schedule& s, std::int64_t batch_size,
                           std::int64_t nnz_q) {
  const WorkspaceLayout& l = s.layout;
  check_fits(op, l);
  const auto grow = [&](Tensor& buffer, std::size_t bytes) {
    if (buffer.defined() && buffer.nbytes() >= bytes) return;
    buffer = Tensor();  // the old buffer goes first: its memory may be needed for the new one
    buffer = Tensor::empty({std::int64_t(std::max<std::size_t>(bytes, 4))}, DType::kU8, device_);
  };
  if (!caller_int_.defined()) grow(int_buffer_, l.int_bytes);
  if (!caller_float_.defined()) grow(float_buffer_, l.float_bytes);
  const TensorView int_buffer = caller_int_.defined() ? caller_int_ : int_buffer_.view();

  // The CPU reads the schedule where it is written; a GPU gets it through a host
  // staging buffer kept across plans, in one copy.
  auto* dst = static_cast<std::uint8_t*>(int_buffer.data());
  if (device_.is_cpu()) {
    write_schedule(s, batch_size, nnz_q, dst);
    return;
  }
  if (!staging_.defined() || staging_.nbytes() < l.int_bytes) {
    staging_ =
        Tensor::empty({std::int64_t(std::max<std::size_t>(l.int_bytes, int_buffer_.nbytes()))}, DType::kU8);
  }
  write_schedule(s, batch_size, nnz_q, staging_.data_as<std::uint8_t>());
  copy(TensorView(dst, DType::kU8, {std::int64_t(l.int_bytes)}, device_),
       staging_.view().slice(0, 0, std::int64_t(l.int_bytes)));
  backend_for(device_).synchronize(nullptr);  // the staging buffer is rewritten by the next plan
}

ScheduleView PlanWorkspace::view(const WorkspaceLayout& l) const {
  const auto* ws =
      static_cast<const std::uint8_t*>(caller_int_.defined() ? caller_int_.data() : int_buffer_.data());
  auto* fws =
      static_cast<std::uint8_t*>(caller_float_.defined() ? caller_float_.data() : float_buffer_.data());
  return {reinterpret_cast<const RequestInfo*>(ws + l.requests),
          reinterpret_cast<const WorkItem*>(ws + l.items),
          reinterpret_cast<const MergeToken*>(ws + l.merge_tokens),
          reinterpret_cast<const std::int32_t*>(ws + l.counts),
          reinterpret_cast<float*>(fws + l.partial_o),
          reinterpret_cast<float*>(fws + l.partial_lse),
          reinterpret_cast<DeviceStatus*>(const_cast<std::uint8_t*>(ws) + l.status)};
}

}  // namespace kvinfer::detail
