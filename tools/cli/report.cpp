// SPDX-License-Identifier: Apache-2.0
#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace kvinfer::cli {
namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * double(v.size() - 1);
  const auto lo = std::size_t(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0;
}

nlohmann::json phase(double total_s, const std::vector<double>& step_ms, double flops, double bytes) {
  return {{"total_s", total_s},
          {"steps", step_ms.size()},
          {"ms_per_step_mean", mean(step_ms)},
          {"ms_per_step_p50", percentile(step_ms, 0.5)},
          {"ms_per_step_p99", percentile(step_ms, 0.99)},
          {"flops", flops},
          {"bytes", bytes},
          {"gflops_per_s", ratio(flops, total_s) / 1e9},
          {"gbytes_per_s", ratio(bytes, total_s) / 1e9}};
}

}  // namespace

void RunMetrics::add(const StepBatch& batch, const StepStats& s, std::int32_t pages_in_use, double step_s,
                     double end_s) {
  ++steps;
  const auto requests =
      std::int64_t(batch.decode.size()) + std::count_if(batch.prefill.begin(), batch.prefill.end(),
                                                        [](const PrefillWork& w) { return w.sequence >= 0; });
  series.step.push_back(batch.step);
  series.batch.push_back(requests);
  series.prefill_tokens.push_back(batch.prefill_tokens());
  series.decode_tokens.push_back(std::int64_t(batch.decode.size()));
  series.pages_in_use.push_back(pages_in_use);
  series.t_s.push_back(end_s);
  series.step_ms.push_back(step_s * 1e3);
  series.plan_ms.push_back(s.plan_s * 1e3);
  series.append_ms.push_back(s.append_s * 1e3);
  series.prefill_ms.push_back(s.prefill_s * 1e3);
  series.decode_ms.push_back(s.decode_s * 1e3);
  for (const PrefillWork& w : batch.prefill) {
    prompt_tokens += w.qo_len;
    if (w.sequence >= 0) ++generated_tokens;
  }
  generated_tokens += std::int64_t(batch.decode.size());
  peak_batch = std::max(peak_batch, requests);
  plan_s += s.plan_s;
  append_s += s.append_s;
  prefill_s += s.prefill_s;
  decode_s += s.decode_s;
  prefill_flops += s.prefill_flops;
  prefill_bytes += s.prefill_bytes;
  decode_flops += s.decode_flops;
  decode_bytes += s.decode_bytes;
  if (s.prefill_rows > 0) {
    ++prefill_steps;
    prefill_step_ms.push_back(s.prefill_s * 1e3);
  }
  if (s.decode_rows > 0) {
    ++decode_steps;
    decode_step_ms.push_back(s.decode_s * 1e3);
  }
  if (s.cascade_rows > 0) ++cascade_steps;
  cascade_rows += s.cascade_rows;
}

// The series as JSON columns named as its members.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RunMetrics::Series, step, t_s, batch, prefill_tokens, decode_tokens, step_ms,
                                   plan_ms, append_ms, prefill_ms, decode_ms, pages_in_use)

nlohmann::json make_report(const RunMetrics& m, const ReportContext& c) {
  std::vector<double> ttft, e2e;
  for (const RequestTimes& t : c.times) {
    if (t.first_token_step >= 0) ttft.push_back(t.first_token_s - t.arrival_s);
    if (t.finish_step >= 0) e2e.push_back(t.finish_s - t.arrival_s);
  }
  const double attention_s = m.prefill_s + m.decode_s;
  nlohmann::json r;
  r["config"] = c.config;
  r["result"] = {{"steps", m.steps},
                 {"prefill_steps", m.prefill_steps},
                 {"decode_steps", m.decode_steps},
                 {"wall_s", m.wall_s},
                 {"prompt_tokens", m.prompt_tokens},
                 {"generated_tokens", m.generated_tokens},
                 {"tokens_per_s", ratio(double(m.prompt_tokens + m.generated_tokens), m.wall_s)},
                 {"prompt_tokens_per_s", ratio(double(m.prompt_tokens), m.wall_s)},
                 {"generated_tokens_per_s", ratio(double(m.generated_tokens), m.wall_s)},
                 {"peak_batch", m.peak_batch}};
  r["attention"] = {{"total_s", attention_s},
                    {"share_of_wall", ratio(attention_s, m.wall_s)},
                    {"prefill", phase(m.prefill_s, m.prefill_step_ms, m.prefill_flops, m.prefill_bytes)},
                    {"decode", phase(m.decode_s, m.decode_step_ms, m.decode_flops, m.decode_bytes)},
                    {"cascade_steps", m.cascade_steps},
                    {"cascade_rows", m.cascade_rows},
                    {"append_s", m.append_s},
                    {"plan_s", m.plan_s}};
  r["pages"] = {{"page_size", c.page_size},
                {"num_pages", c.num_pages},
                {"peak_in_use", c.peak_pages},
                {"peak_fraction", ratio(c.peak_pages, c.num_pages)},
                {"kv_cache_bytes", c.kv_cache_bytes}};
  r["latency"] = {{"ttft_s_mean", mean(ttft)},
                  {"ttft_s_p50", percentile(ttft, 0.5)},
                  {"ttft_s_p99", percentile(ttft, 0.99)},
                  {"e2e_s_mean", mean(e2e)},
                  {"e2e_s_p99", percentile(e2e, 0.99)}};
  r["check"] = c.check;
  // Columns of equal length, one entry per step: batch = requests in the step (prefill
  // and decode), tokens = query rows; times in ms, all layers (device time on a GPU).
  r["series"] = m.series;
  return r;
}

void print_report(const nlohmann::json& r, const ReportContext& c) {
  const auto& res = r["result"];
  const auto& att = r["attention"];
  const auto& pf = att["prefill"];
  const auto& dc = att["decode"];
  const auto& pg = r["pages"];
  const auto& lat = r["latency"];
  fmt::print("kvinfer serve: {}\n", c.headline);
  fmt::print("trace:     {}\n", c.trace_line);
  fmt::print("steps:     {} ({} with prefill, {} with decode) in {:.2f} s\n",
             res["steps"].get<std::int64_t>(), res["prefill_steps"].get<std::int64_t>(),
             res["decode_steps"].get<std::int64_t>(), res["wall_s"].get<double>());
  fmt::print(
      "tokens:    {} prompt + {} generated = {:.0f} tokens/s ({:.0f} generated tokens/s), peak batch {}\n",
      res["prompt_tokens"].get<std::int64_t>(), res["generated_tokens"].get<std::int64_t>(),
      res["tokens_per_s"].get<double>(), res["generated_tokens_per_s"].get<double>(),
      res["peak_batch"].get<std::int64_t>());
  fmt::print("attention: {:.2f} s ({:.0f}% of the run); append {:.2f} s, plan {:.3f} s\n",
             att["total_s"].get<double>(), 100 * att["share_of_wall"].get<double>(),
             att["append_s"].get<double>(), att["plan_s"].get<double>());
  fmt::print(
      "  prefill  {:8.2f} ms/step (p50 {:.2f}, p99 {:.2f}) over {} steps: {:.1f} GFLOP/s, {:.2f} GB/s\n",
      pf["ms_per_step_mean"].get<double>(), pf["ms_per_step_p50"].get<double>(),
      pf["ms_per_step_p99"].get<double>(), pf["steps"].get<std::int64_t>(), pf["gflops_per_s"].get<double>(),
      pf["gbytes_per_s"].get<double>());
  fmt::print(
      "  decode   {:8.2f} ms/step (p50 {:.2f}, p99 {:.2f}) over {} steps: {:.2f} GB/s, {:.1f} GFLOP/s{}\n",
      dc["ms_per_step_mean"].get<double>(), dc["ms_per_step_p50"].get<double>(),
      dc["ms_per_step_p99"].get<double>(), dc["steps"].get<std::int64_t>(), dc["gbytes_per_s"].get<double>(),
      dc["gflops_per_s"].get<double>(),
      att["cascade_rows"].get<std::int64_t>() > 0
          ? fmt::format("; cascade in {} steps ({} rows)", att["cascade_steps"].get<std::int64_t>(),
                        att["cascade_rows"].get<std::int64_t>())
          : "");
  fmt::print("pages:     peak {} of {} in use ({:.0f}%), page size {}, KV cache {:.1f} MiB\n",
             pg["peak_in_use"].get<std::int64_t>(), pg["num_pages"].get<std::int64_t>(),
             100 * pg["peak_fraction"].get<double>(), pg["page_size"].get<std::int64_t>(),
             double(pg["kv_cache_bytes"].get<std::int64_t>()) / double(1 << 20));
  fmt::print("latency:   time to first token {:.3f} s mean, {:.3f} s p99; request {:.3f} s mean\n",
             lat["ttft_s_mean"].get<double>(), lat["ttft_s_p99"].get<double>(),
             lat["e2e_s_mean"].get<double>());
  const auto& ck = r["check"];
  if (ck.value("enabled", false)) {
    fmt::print(
        "check:     passed: {} segments on {} (step, layer) pairs match the float64 oracle (max |error| "
        "{:.2g} in o, {:.2g} in LSE; tolerance {:.2g} + {:.2g} |ref|)\n",
        ck["segments"].get<std::int64_t>(), ck["layer_steps"].get<std::int64_t>(),
        ck["max_err_o"].get<double>(), ck["max_err_lse"].get<double>(), ck["atol"].get<double>(),
        ck["rtol"].get<double>());
  }
}

}  // namespace kvinfer::cli
