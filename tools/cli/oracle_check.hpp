// SPDX-License-Identifier: Apache-2.0
// `kvinfer serve --check`: on sampled steps and layers, the outputs of the
// wrappers are compared with the float64 oracle (kvinfer_oracle) over the dense
// K/V gathered back from the paged cache. A mismatch throws CheckFailure.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#include "model_preset.hpp"

namespace kvinfer::cli {

class CheckFailure : public std::runtime_error {
 public:
  explicit CheckFailure(const std::string& message) : std::runtime_error(message) {}
};

// One request's query rows in a step, as the engine ran them: rows
// [row_begin, row_begin + qo_len) of q/out attended keys [0, kv_len) held in `pages`.
struct CheckSegment {
  std::string label;  // "prefill of request 3", "decode of request 7 (cascade, group 1)"
  std::int64_t row_begin = 0;
  std::int32_t qo_len = 0;
  std::int32_t kv_len = 0;
  std::vector<std::int32_t> pages;
};

struct CheckSummary {
  std::int64_t layer_steps = 0;  // (step, layer) pairs compared
  std::int64_t segments = 0;     // request segments compared
  std::int64_t rows = 0;         // query rows compared (x heads)
  double max_err_o = 0, max_err_lse = 0;
  double atol = 0, rtol = 0;
};

class OracleCheck {
 public:
  // Every `every`-th step is checked, at one layer that rotates over the model.
  OracleCheck(const ModelShape& model, std::int32_t page_size, std::int64_t every);

  bool wants(std::int64_t step_index, int layer) const;

  // q [rows, Hq, D], out [rows, Hq, D], lse [rows, Hq]; on any device.
  void check_gqa(std::int64_t step, int layer, const TensorView& q, const TensorView& out,
                 const TensorView& lse, const PagedKVCache& cache, const std::vector<CheckSegment>& segments);
  // q_nope [rows, H, 512], q_pe [rows, H, 64], out [rows, H, 512], lse [rows, H].
  void check_mla(std::int64_t step, int layer, const TensorView& q_nope, const TensorView& q_pe,
                 const TensorView& out, const TensorView& lse, const MLACache& cache,
                 const std::vector<CheckSegment>& segments);

  const CheckSummary& summary() const { return summary_; }
  // Adds 1 to the first output compared, so that tests can see a mismatch fail the run.
  void inject_fault() { inject_fault_ = true; }

 private:
  std::vector<const CheckSegment*> sample(std::int64_t step, const std::vector<CheckSegment>& segments) const;

  ModelShape model_;
  std::int32_t page_size_;
  std::int64_t every_;
  CheckSummary summary_;
  bool inject_fault_ = false;
};

}  // namespace kvinfer::cli
