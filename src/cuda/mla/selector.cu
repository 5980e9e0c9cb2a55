// SPDX-License-Identifier: Apache-2.0
// Kernel selection for MLA on the GPU. No MLA kernel is compiled yet: every
// configuration is reported as unsupported. (No fmt here: nvcc rejects its
// compile-time format strings.)
#include <string>

#include "cuda/mla.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda {

void run_mla(const detail::MLAParams& p) {
  const detail::MLAProblem& pr = p.problem;
  throw Error("BatchMLAPagedAttention", "device", "cuda",
              "no CUDA MLA kernel is compiled yet (head_dim_ckv " + std::to_string(pr.head_dim_ckv) +
                  ", head_dim_kpe " + std::to_string(pr.head_dim_kpe) + ", " +
                  std::string(dtype_name(pr.q_dtype)) + " q, " + std::string(dtype_name(pr.kv_dtype)) +
                  " KV); use the CPU backend");
}

}  // namespace kvinfer::cuda
