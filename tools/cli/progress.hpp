// SPDX-License-Identifier: Apache-2.0
// The progress bar of `kvinfer serve` on a terminal: the share of the trace's tokens
// done, an ETA, the step and the layer within it, the scheduler's queues and the page
// pool. It moves within a step, at each layer (a deepseek-v3 prefill step runs for
// minutes on the CPU), and is redrawn at most ten times a second on stderr, only when
// stderr is a terminal and -q was not given: a log or a pipe gets no control codes.
#pragma once

#include <cstdint>
#include <string>

namespace kvinfer::cli {

// What the bar shows besides the fraction; filled by the caller after each step.
struct ProgressStatus {
  std::int64_t step = 0;
  std::int64_t running = 0, waiting = 0, finished = 0, requests = 0;
  std::int32_t pages_in_use = 0, num_pages = 0;
  double tokens_per_s = 0;
};

class Progress {
 public:
  // `total_tokens`: prompt and generated tokens the run is expected to process (the
  // bar's 100%); `num_layers`: the layers each step runs.
  Progress(bool enabled, std::int64_t total_tokens, int num_layers);
  ~Progress();

  bool enabled() const { return enabled_; }
  // A step of `step_tokens` tokens starts; its layers then move the bar.
  void begin_step(const ProgressStatus& status, std::int64_t step_tokens);
  void layer_done(int layer);
  // The step is done: `tokens_done` in all.
  void end_step(const ProgressStatus& status, std::int64_t tokens_done);
  // Clears the line (before the report, or an error message).
  void finish();

  // The line for a terminal `columns` wide at fraction `f` after `elapsed_s`; public
  // for tests of the layout.
  std::string render(double f, double elapsed_s, std::size_t columns) const;

 private:
  void draw(bool force);

  bool enabled_;
  std::int64_t total_tokens_;
  int num_layers_;
  ProgressStatus status_;
  std::int64_t tokens_done_ = 0, step_tokens_ = 0;
  int layer_ = -1;  // last layer done in the current step, -1: none yet
  double start_s_ = 0, last_draw_s_ = -1;
  std::size_t drawn_ = 0;  // characters on the line now
};

// "1:02:03", "4:05", "--:--" for an unknown time.
std::string format_duration(double seconds);

}  // namespace kvinfer::cli
