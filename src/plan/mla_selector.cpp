// SPDX-License-Identifier: Apache-2.0
#include "plan/mla_selector.hpp"

#include <fmt/format.h>

#include "kvinfer/core/error.hpp"

namespace kvinfer::detail {

KernelKey select_mla_kernel(const MLAProblem& pr, std::int64_t max_item_rows, const MlaKernelCaps& caps) {
  // Items of 16, 32 or 64 rows (row blocks of 16): the fewest that hold the longest
  // item, so that no CTA computes empty row blocks (decode with 16 heads: 16 rows).
  const int rows = max_item_rows <= 16 ? 16 : max_item_rows <= 32 ? 32 : 64;
  for (std::size_t i = 0; i < caps.instances.size(); ++i) {
    if (caps.instances[i].q == pr.q_dtype && caps.instances[i].kv == pr.kv_dtype) {
      return {KernelFamily::kMla, int(i), rows};
    }
  }
  throw Error("BatchMLAPagedAttention", "kernel",
              fmt::format("{} q, {} KV", dtype_name(pr.q_dtype), dtype_name(pr.kv_dtype)),
              fmt::format("no CUDA MLA kernel for this configuration is compiled in the '{}' instance preset; "
                          "configure with -DKVINFER_INSTANCES=default (fp16/bf16 q; KV of the query's type, "
                          "float8_e4m3 or float8_e5m2)",
                          caps.preset));
}

}  // namespace kvinfer::detail
