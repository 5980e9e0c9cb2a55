// SPDX-License-Identifier: Apache-2.0
// The model side of `kvinfer serve`: a KV cache of one page pool per layer and the
// attention wrappers. Each step it turns the scheduler's batch into page tables,
// plans once, then for every layer appends the step's new K/V and runs prefill,
// decode and (for requests sharing a prefix) cascade attention. Keys, values and
// queries are random; the attention is real. Uses only the public API.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "kvinfer/kvinfer.hpp"
#include "model_preset.hpp"
#include "scheduler.hpp"

namespace kvinfer::cli {

class OracleCheck;

struct EngineOptions {
  Device device = Device::cpu();
  std::int32_t page_size = 16;
  std::int32_t num_pages = 0;
  std::int64_t max_step_rows = 0;  // query rows of one step (prefill + decode)
  bool cascade = true;             // decode groups sharing a prefix through MultiLevelCascadeAttention
  std::uint64_t seed = 1;
  // Called after each layer of a step with its index (the progress bar moves within
  // long steps); on a GPU the layer's work is then enqueued, not necessarily done.
  std::function<void(int layer)> on_layer;
};

// What one step did, summed over the layers.
struct StepStats {
  double plan_s = 0, append_s = 0, prefill_s = 0, decode_s = 0;
  double prefill_flops = 0, prefill_bytes = 0;  // bytes: K/V attended (each key once per request) + q + o
  double decode_flops = 0, decode_bytes = 0;    // cascade: a shared prefix is read once per group
  std::int64_t prefill_rows = 0, decode_rows = 0, cascade_rows = 0, cascade_groups = 0;
};

class Engine {
 public:
  Engine(const ModelShape& model, const EngineOptions& options);
  ~Engine();

  // Runs `batch` through every layer; `check`, when given, compares the layers it
  // samples with the float64 oracle (throws CheckFailure on a mismatch).
  StepStats run_step(const StepBatch& batch, OracleCheck* check);

  std::int64_t kv_cache_bytes() const;  // all layers
  void set_on_layer(std::function<void(int layer)> on_layer);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvinfer::cli
