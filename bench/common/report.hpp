// SPDX-License-Identifier: Apache-2.0
// The output of every benchmark: a printed table and, with --json PATH, a JSON file
// {"bench", "device", "ceilings", "rows": [{"name", metrics...}]} that
// scripts/gpu-check.sh merges into one report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/common/args.hpp"

namespace kvinfer::bench {

class Report {
 public:
  explicit Report(std::string bench) : bench_(std::move(bench)) {}
  nlohmann::json& meta() { return meta_; }  // device, ceilings, notes
  void add_row(nlohmann::json row) { rows_.push_back(std::move(row)); }
  // Prints the rows as a table (columns: `columns`, in order) and writes the JSON.
  void finish(const Args& args, const std::vector<std::string>& columns) const;

 private:
  std::string bench_;
  nlohmann::json meta_ = nlohmann::json::object();
  std::vector<nlohmann::json> rows_;
};

}  // namespace kvinfer::bench
