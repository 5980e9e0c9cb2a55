// SPDX-License-Identifier: Apache-2.0
// What `kvinfer serve` measures and reports: totals over the steps, the series of
// every step (for plots: tools/plot/plot_serve.py), the report printed at the end and
// its JSON form.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine.hpp"
#include "scheduler.hpp"

namespace kvinfer::cli {

struct RunMetrics {
  std::int64_t steps = 0, prefill_steps = 0, decode_steps = 0, cascade_steps = 0;
  std::int64_t prompt_tokens = 0;     // prefill query rows (a shared prefix once per fill)
  std::int64_t generated_tokens = 0;  // one per prefilled request and per decode row
  std::int64_t cascade_rows = 0;
  std::int64_t peak_batch = 0;  // requests in one step (prefill + decode)
  double wall_s = 0, plan_s = 0, append_s = 0, prefill_s = 0, decode_s = 0;
  double prefill_flops = 0, prefill_bytes = 0, decode_flops = 0, decode_bytes = 0;
  std::vector<double> prefill_step_ms, decode_step_ms;  // attention time of each step, all layers

  // One entry per step, in order: the report's "series".
  struct Series {
    std::vector<std::int64_t> step, batch, prefill_tokens, decode_tokens, pages_in_use;
    std::vector<double> t_s, step_ms, plan_ms, append_ms, prefill_ms, decode_ms;
  } series;

  // After a step: its batch, what it did, the pages in use during it (before the
  // finished requests' pages return) and its wall time.
  void add(const StepBatch& batch, const StepStats& stats, std::int32_t pages_in_use, double step_s,
           double end_s);
};

// Everything the report shows besides the metrics.
struct ReportContext {
  nlohmann::json config;  // model, device, trace, scheduler settings
  std::string headline;   // one line: model on device
  std::string trace_line;
  std::int32_t num_pages = 0, peak_pages = 0, page_size = 0;
  std::int64_t kv_cache_bytes = 0;
  std::vector<RequestTimes> times;
  nlohmann::json check;  // {"enabled": false} or the summary
};

nlohmann::json make_report(const RunMetrics& m, const ReportContext& c);
void print_report(const nlohmann::json& report, const ReportContext& c);

}  // namespace kvinfer::cli
