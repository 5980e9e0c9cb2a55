// SPDX-License-Identifier: Apache-2.0
// What `kvinfer serve` measures and reports: totals over the steps, the report
// printed at the end, its JSON form (written atomically: a temporary file renamed
// into place, so a failed run leaves nothing half-written), and the one-line
// progress display on a terminal.
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

  void add(const StepBatch& batch, const StepStats& stats);
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

// Fails early (InputError) when `path` cannot be written, so that a long run does not
// end without its report.
void check_writable(const std::string& path);
// Writes `report` to path.tmp-PID, then renames it to `path`.
void write_json_atomic(const std::string& path, const nlohmann::json& report);

// A one-line status on stderr, redrawn at most ten times a second; off when stderr is
// not a terminal.
class Progress {
 public:
  explicit Progress(bool enabled);
  void update(const Scheduler& s, const RunMetrics& m, std::int32_t pages_in_use, std::int32_t num_pages,
              bool force = false);
  void finish();

 private:
  bool enabled_;
  double last_ = -1;
  std::size_t width_ = 0;
};

}  // namespace kvinfer::cli
