// SPDX-License-Identifier: Apache-2.0
// Request traces for `kvinfer serve`: what arrives when, how long its prompt is,
// how many tokens it generates and which shared prefix (a system prompt) it
// starts with. Built-in synthetic traces, or a JSON / CSV file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvinfer::cli {

struct TraceRequest {
  std::int64_t arrival = 0;        // engine step at which the request arrives
  std::int32_t prompt_len = 0;     // tokens, >= 1
  std::int32_t gen_len = 0;        // tokens to generate, >= 1 (the first comes from prefill)
  std::int32_t prefix_group = -1;  // index into Trace::prefix_groups, -1: none
  std::int32_t prefix_len = 0;     // leading prompt tokens shared with the group, < prompt_len
};

struct PrefixGroup {
  std::string name;
  std::int32_t prefix_len = 0;
  std::int32_t members = 0;
};

struct Trace {
  std::string source;                  // "synthetic:mixed" or the file name
  std::vector<TraceRequest> requests;  // ordered by arrival
  std::vector<PrefixGroup> prefix_groups;
};

// Parameters of the synthetic traces; ranges are inclusive.
struct SyntheticTraceOptions {
  std::string name = "mixed";
  int num_requests = 64;
  std::int32_t prompt_min = 64, prompt_max = 1024;
  std::int32_t gen_min = 16, gen_max = 128;
  int prefix_groups = 2;          // shared-prefix groups (mixed, shared-prefix)
  std::int32_t prefix_len = 512;  // tokens of each group's shared prefix
  double arrival_rate = 4.0;      // requests per step (Poisson); 0: all at step 0
  std::uint64_t seed = 1;
};

// Names and one-line descriptions of the synthetic traces.
struct TraceInfo {
  std::string name, summary;
};
std::vector<TraceInfo> synthetic_traces();

// Throws InputError for an unknown name or inconsistent options.
Trace make_synthetic_trace(const SyntheticTraceOptions& options);

// Reads a JSON or CSV trace (by extension: .json / .csv), checking every field;
// throws InputError naming the file, the entry or line, the field and the rule.
//   JSON: {"requests": [{"prompt_len": 300, "gen_len": 40, "arrival": 0,
//                        "prefix_group": "system", "prefix_len": 256}, ...]} or just the array
//   CSV:  a header naming the columns (prompt_len and gen_len required; arrival,
//         prefix_group, prefix_len optional), one request per line, # comments
Trace load_trace_file(const std::string& path);

// Shared checks of a trace (also for synthetic ones); throws InputError.
void validate_trace(const Trace& trace);

}  // namespace kvinfer::cli
