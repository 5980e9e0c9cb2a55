// SPDX-License-Identifier: Apache-2.0
// The command line of every benchmark, parsed with CLI11 as the kvinfer program
// parses its own: --help lists the flags and exits 0; an unknown flag, a malformed
// value or one out of its range prints the error and exits 2, before any work.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace kvinfer::bench {

struct Args {
  std::string json_path;  // --json PATH
  int runs = 30;          // --runs N (timed runs per case, >= 20 for reported figures)
  bool quick = false;     // --quick: fewer and smaller cases (smoke runs)
  std::string filter;     // --filter TEXT: only cases whose name contains TEXT (for profiling one case)
  bool check = false;     // --check: each case against the float64 oracle first (benchmarks whose cases
                          // are test cases; slow for large shapes)
  bool selected(const std::string& name) const {
    return filter.empty() || name.find(filter) != std::string::npos;
  }
};

struct ArgsSpec {
  std::string description;  // the first line of --help
  Args defaults;
  bool has_check = false;  // offers --check
  // Adds the benchmark's own flags.
  std::function<void(CLI::App&)> extra;
};

Args parse_args(int argc, char** argv, const ArgsSpec& spec);

}  // namespace kvinfer::bench
