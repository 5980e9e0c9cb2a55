// SPDX-License-Identifier: Apache-2.0
// The start every GPU benchmark shares: its report, with the device it runs on in the
// report's meta, or an exit where no GPU is visible.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/common/gpu_json.hpp"
#include "bench/common/report.hpp"
#include "kvinfer/kvinfer.hpp"

namespace kvinfer::bench {

// The report of benchmark `bench` (bench_<bench>); without a GPU it says so on stderr
// and the process exits with 1.
inline Report gpu_report(const std::string& bench) {
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_%s: no GPU\n", bench.c_str());
    std::exit(1);
  }
  Report report(bench);
  report.meta()["device"] = to_json(device_info());
  return report;
}

}  // namespace kvinfer::bench
