// SPDX-License-Identifier: Apache-2.0
#include "core/plan_checks.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/check.hpp"
#include "kvinfer/layout/ragged.hpp"

namespace kvinfer::detail {

void check_wrapper_device(std::string_view op, Device device) {
  if (!device.is_cuda()) return;
  require(cuda_backend_built(), op, "device", to_string(device),
          "the CUDA backend is not built (configure with -DKVINFER_CUDA=ON on a machine with nvcc)");
  require_v(device.index >= 0 && device.index < cuda_device_count(), op, "device", to_string(device),
            fmt::format("no such GPU ({} found)", cuda_device_count()));
}

void check_capacity(std::string_view op, const Capacity& c) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  const auto in_range = [](std::int64_t x) { return x >= 0 && x <= kMax; };
  require_v(in_range(c.max_batch) && in_range(c.max_qo_tokens) && in_range(c.max_kv), op, "capacity",
            fmt::format("{{{}, {}, {}}}", c.max_batch, c.max_qo_tokens, c.max_kv),
            "capacities must be in [0, 2^31 - 1] (they bound int32 index arrays)");
}

void check_options_enums(std::string_view op, const AttentionOptions& o) {
  require_v(o.mask_mode == MaskMode::kNone || o.mask_mode == MaskMode::kCausal || o.mask_mode == MaskMode::kCustom,
            op, "options.mask_mode", int(o.mask_mode), "must be MaskMode::kNone, kCausal or kCustom");
  require_v(o.pos_encoding == PosEncoding::kNone || o.pos_encoding == PosEncoding::kRopeLlama ||
                o.pos_encoding == PosEncoding::kAlibi,
            op, "options.pos_encoding", int(o.pos_encoding), "must be PosEncoding::kNone, kRopeLlama or kAlibi");
  require_v(o.backend == PrefillBackend::kAuto || o.backend == PrefillBackend::kPortable ||
                o.backend == PrefillBackend::kHopper,
            op, "options.backend", int(o.backend), "must be PrefillBackend::kAuto, kPortable or kHopper");
}

void check_kv_layout(std::string_view op, std::string_view arg, KVLayout layout) {
  require_v(layout == KVLayout::kNHD || layout == KVLayout::kHND, op, arg, int(layout),
            "must be KVLayout::kNHD or KVLayout::kHND");
}

void check_finite(std::string_view op, std::string_view arg, float x, bool positive, std::string_view rule) {
  require_v(std::isfinite(x) && (positive ? x > 0.0f : x >= 0.0f), op, arg, x, rule);
}

void check_host_index_array(std::string_view op, std::string_view name, const TensorView& t,
                            std::int64_t length) {
  check_index_array(op, name, t, length);
  require(t.device().is_cpu(), op, fmt::format("{}.device", name), to_string(t.device()),
          "plan() takes host copies of the lengths (SPEC §5)");
}

std::vector<std::int32_t> host_lengths(std::string_view op, std::string_view name, const TensorView& indptr,
                                       std::int64_t batch_size) {
  check_host_index_array(op, name, indptr, batch_size < 0 ? -1 : batch_size + 1);
  return lengths_from_indptr(op, name, indptr);
}

void check_page_ids(std::string_view op, const TensorView& kv_indices, std::int64_t nnz,
                    std::int64_t num_pages, std::string_view pages_of, bool on_device) {
  if (nnz <= 0) return;
  std::vector<std::int32_t> copied;
  const std::int32_t* ids = nullptr;
  if (kv_indices.device().is_cpu()) {
    ids = kv_indices.data_as<const std::int32_t>();
  } else if (on_device) {
    copied.resize(std::size_t(nnz));
    copy(TensorView(copied.data(), DType::kI32, {nnz}), kv_indices.slice(0, 0, nnz));
    ids = copied.data();
  } else {
    return;
  }
  for (std::int64_t i = 0; i < nnz; ++i) {
    if (ids[i] < 0 || ids[i] >= num_pages) {
      fail(op, fmt::format("kv_indices[{}]", i), std::to_string(ids[i]),
           fmt::format("page ids must be in [0, {}) ({})", num_pages, pages_of));
    }
  }
}

}  // namespace kvinfer::detail
