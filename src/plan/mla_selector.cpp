// SPDX-License-Identifier: Apache-2.0
#include "plan/mla_selector.hpp"

#include <fmt/format.h>

#include <string_view>

#include "kvinfer/core/error.hpp"
#include "plan/instance_presets.hpp"

namespace kvinfer::detail {

KernelKey select_mla_kernel(const MLAProblem& pr, std::int64_t max_item_rows, const MlaKernelCaps& caps) {
  // Items of 16, 32 or 64 rows (row blocks of 16): the fewest that hold the longest
  // item, so that no CTA computes empty row blocks (decode with 16 heads: 16 rows).
  const int rows = max_item_rows <= 16 ? 16 : max_item_rows <= 32 ? 32 : 64;
  // 64 rows (64 heads and more: compute-bound) run on wgmma where the device has it, for
  // 16-bit KV of the query's type (fp8 and mixed types convert tiles the wgmma kernel
  // does not stage); fewer rows would leave most of its 64-row tile empty.
  const bool same_16bit = pr.q_dtype == pr.kv_dtype && (pr.kv_dtype == DType::kF16 || pr.kv_dtype == DType::kBF16);
  const KernelFamily family = caps.hopper && caps.wgmma && rows == 64 && same_16bit ? KernelFamily::kMlaWgmma : KernelFamily::kMla;
  for (std::size_t i = 0; i < caps.instances.size(); ++i) {
    if (caps.instances[i].q == pr.q_dtype && caps.instances[i].kv == pr.kv_dtype) {
      return {family, int(i), rows};
    }
  }
  // The smallest other preset with an instance of these dtypes, for the error.
  std::string_view other;
  for (const InstancePreset& preset : instance_presets()) {
    if (!other.empty() || preset.name == caps.preset) continue;
    for (const MlaInstance& inst : preset.mla) {
      if (inst.q == pr.q_dtype && inst.kv == pr.kv_dtype) other = preset.name;
    }
  }
  throw Error("BatchMLAPagedAttention", "kernel",
              fmt::format("{} q, {} KV", dtype_name(pr.q_dtype), dtype_name(pr.kv_dtype)),
              other.empty()
                  ? fmt::format("no CUDA MLA kernel for this configuration in any instance preset (this build: "
                                "'{}'); the CPU backend runs it",
                                caps.preset)
                  : fmt::format("no CUDA MLA kernel for this configuration is compiled in the '{}' instance preset; "
                                "the '{}' preset has one (configure with -DKVINFER_INSTANCES={})",
                                caps.preset, other, other));
}

}  // namespace kvinfer::detail
