// SPDX-License-Identifier: Apache-2.0
// Kernel selection for attention on the GPU. No attention kernel instances are
// compiled yet: every configuration is reported as unsupported.
#include <string>

#include "cuda/attention.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda {

std::int32_t q_tile_rows(const detail::AttentionProblem& problem) {
  throw Error("attention", "device", "cuda",
              "no CUDA attention kernel is compiled for head_dim " + std::to_string(problem.head_dim_qk) + "/" +
                  std::to_string(problem.head_dim_vo) + " with " + std::string(dtype_name(problem.q_dtype)) +
                  " q and " + std::string(dtype_name(problem.kv_dtype)) + " KV; use the CPU backend");
}

void run_attention(const detail::AttentionParams& p) { q_tile_rows(p.problem); }

}  // namespace kvinfer::cuda
