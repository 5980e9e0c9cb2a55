// SPDX-License-Identifier: Apache-2.0
#include "progress.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace kvinfer::cli {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::size_t terminal_columns() {
  winsize ws{};
  if (::ioctl(::fileno(stderr), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

}  // namespace

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0 || s > 360000) return "--:--";
  const auto t = std::int64_t(std::llround(s));
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
  return fmt::format("{}:{:02}", t / 60, t % 60);
}

Progress::Progress(bool enabled, std::int64_t total_tokens, int num_layers)
    : enabled_(enabled && ::isatty(::fileno(stderr))),
      total_tokens_(std::max<std::int64_t>(total_tokens, 1)),
      num_layers_(std::max(num_layers, 1)),
      start_s_(now_s()) {}

Progress::~Progress() {
  finish();
}

void Progress::begin_step(const ProgressStatus& status, std::int64_t step_tokens) {
  status_ = status;
  step_tokens_ = step_tokens;
  layer_ = -1;
  draw(false);
}

void Progress::layer_done(int layer) {
  layer_ = layer;
  draw(false);
}

void Progress::end_step(const ProgressStatus& status, std::int64_t tokens_done) {
  status_ = status;
  tokens_done_ = tokens_done;
  step_tokens_ = 0;
  layer_ = -1;
  draw(false);
}

std::string Progress::render(double f, double elapsed_s, std::size_t columns) const {
  // ETA from the average rate so far: steps differ too much (a prefill step against a
  // decode step) for a recent rate to say more; none before the run has a rate.
  const double eta = f > 0.002 && elapsed_s > 0.5 ? elapsed_s * (1 - f) / f : -1;
  std::string text = fmt::format("{:3.0f}% ETA {}", 100 * f, format_duration(eta));
  const std::string parts[] = {
      fmt::format("step {}{}", status_.step,
                  layer_ >= 0 && num_layers_ > 1 ? fmt::format(" layer {}/{}", layer_ + 1, num_layers_) : ""),
      fmt::format("running {} waiting {} done {}/{}", status_.running, status_.waiting, status_.finished,
                  status_.requests),
      fmt::format("pages {}/{}", status_.pages_in_use, status_.num_pages),
      fmt::format("{:.0f} tokens/s", status_.tokens_per_s)};
  // One column stays free so that the terminal never wraps. The bar's width follows
  // the terminal's only (a bar that changed with the text would jitter); the parts
  // that fit follow it, in order.
  const std::size_t width = columns > 1 ? columns - 1 : 0;
  const std::size_t cells = width >= 120 ? 30 : width >= 100 ? 20 : width >= 60 ? 10 : 0;
  const std::size_t bar = cells > 0 ? cells + 3 : 0;  // "[", "] "
  for (const std::string& part : parts) {
    if (bar + text.size() + 3 + part.size() > width) break;
    text += " | " + part;
  }
  std::string line;
  if (cells > 0) {
    const auto full = std::min(cells, std::size_t(std::floor(f * double(cells))));
    line = "[" + std::string(full, '#') + std::string(cells - full, '.') + "] ";
  }
  line += text;
  if (line.size() > width) line.resize(width);
  return line;
}

void Progress::draw(bool force) {
  if (!enabled_) return;
  const double t = now_s();
  if (!force && last_draw_s_ >= 0 && t - last_draw_s_ < 0.1) return;
  last_draw_s_ = t;
  const double within = layer_ >= 0 ? double(step_tokens_) * double(layer_ + 1) / double(num_layers_) : 0.0;
  // The total is an estimate (a shared prefix may be filled more than once): the bar
  // stops short of 100% until the run is over.
  const double f = std::min(0.999, (double(tokens_done_) + within) / double(total_tokens_));
  const std::string line = render(f, t - start_s_, terminal_columns());
  fmt::print(stderr, "\r{}{}", line, std::string(drawn_ > line.size() ? drawn_ - line.size() : 0, ' '));
  drawn_ = line.size();
  std::fflush(stderr);
}

void Progress::finish() {
  if (!enabled_ || drawn_ == 0) return;
  fmt::print(stderr, "\r{}\r", std::string(drawn_, ' '));
  std::fflush(stderr);
  drawn_ = 0;
}

}  // namespace kvinfer::cli
