// SPDX-License-Identifier: Apache-2.0
#include "bench/common/report.hpp"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace kvinfer::bench {

namespace {

std::string cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    const double d = v.get<double>();
    std::snprintf(buf, sizeof buf, d != 0 && (d < 0.01 && d > -0.01) ? "%.3g" : "%.2f", d);
    return buf;
  }
  return v.dump();
}

}  // namespace

void Report::finish(const Args& args, const std::vector<std::string>& columns) const {
  std::vector<std::size_t> width(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    width[c] = columns[c].size();
    for (const auto& r : rows_)
      width[c] = std::max(width[c], cell(r.value(columns[c], nlohmann::json())).size());
  }
  auto line = [&](auto get) {
    for (std::size_t c = 0; c < columns.size(); ++c) {
      std::printf("%s%-*s", c ? "  " : "", int(width[c]), get(c).c_str());
    }
    std::printf("\n");
  };
  std::printf("== %s\n", bench_.c_str());
  line([&](std::size_t c) { return columns[c]; });
  for (const auto& r : rows_)
    line([&](std::size_t c) { return cell(r.value(columns[c], nlohmann::json())); });
  std::fflush(stdout);
  if (args.json_path.empty()) return;
  nlohmann::json j = meta_;
  j["bench"] = bench_;
  j["columns"] = columns;
  j["rows"] = rows_;
  std::ofstream f(args.json_path);
  if (!f) throw std::runtime_error("cannot write " + args.json_path);
  f << j.dump(2) << "\n";
}

}  // namespace kvinfer::bench
