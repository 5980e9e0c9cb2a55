// SPDX-License-Identifier: Apache-2.0
#include "bench/common/args.hpp"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>

namespace kvinfer::bench {

Args parse_args(int argc, char** argv, const ArgsSpec& spec) {
  Args a = spec.defaults;
  CLI::App app{spec.description};
  app.add_option("--json", a.json_path, "Write the results as JSON to this file")
      ->check([](const std::string& path) -> std::string {
        // Checked now: a benchmark runs for minutes before it writes.
        const std::filesystem::path p(path);
        const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
        if (std::filesystem::is_directory(p)) return "is a directory: " + path;
        if (!std::filesystem::is_directory(dir)) return "directory " + dir.string() + " does not exist";
        return {};
      });
  app.add_option("--runs", a.runs, "Timed runs per case")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_flag("--quick", a.quick, "Fewer and smaller cases (a smoke run)");
  app.add_option("--filter", a.filter, "Only the cases whose name contains this text");
  if (spec.has_check) {
    app.add_flag("--check", a.check,
                 "Compare each case with the float64 oracle before timing it (slow for large shapes)");
  }
  if (spec.extra) spec.extra(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
  return a;
}

}  // namespace kvinfer::bench
