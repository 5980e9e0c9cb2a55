// SPDX-License-Identifier: Apache-2.0
// The ceilings every GPU figure is quoted against, measured in the same run: read
// bandwidth (a 4 GiB streaming reduction), device-to-device copy bandwidth (bytes
// read + written) and the cuBLAS bf16 8192^3 GEMM rate.
#include <cstdio>
#include <exception>

#include "bench/common/gpu_json.hpp"
#include "bench/common/report.hpp"

using namespace kvinfer::bench;

int main(int argc, char** argv) try {
  const Args args = parse_args(
      argc, argv,
      {.description =
           "The GPU ceilings every figure is quoted against: read and copy bandwidth, bf16 GEMM rate"});
  Report report("ceilings");
  const DeviceInfo dev = device_info();
  report.meta()["device"] = to_json(dev);

  const std::size_t read_bytes = args.quick ? std::size_t(1) << 30 : std::size_t(4) << 30;
  std::vector<Ceiling> read_variants;
  const Ceiling read = measure_read_bandwidth(read_bytes, &read_variants);
  const std::vector<Ceiling> read_patterns = measure_read_patterns(read_bytes);
  const Ceiling copy = measure_copy_bandwidth(std::size_t(2) << 30);
  const Ceiling copy_kernel = measure_copy_kernel_bandwidth(std::size_t(2) << 30);
  const Ceiling gemm = measure_gemm_bf16(8192, 8192, 8192);

  nlohmann::json ceilings = nlohmann::json::object();
  for (const Ceiling* c : {&read, &copy, &copy_kernel, &gemm}) ceilings[c->name] = to_json(*c);
  report.meta()["ceilings"] = ceilings;

  auto row = [&](const Ceiling& c, const std::string& name) {
    report.add_row({{"name", name},
                    {"value", c.value},
                    {"unit", c.unit},
                    {"median_us", c.timing.median_us},
                    {"p10_us", c.timing.p10_us},
                    {"p90_us", c.timing.p90_us},
                    {"detail", c.detail}});
  };
  for (const Ceiling& v : read_variants) row(v, "read variant");
  row(read, "read_bandwidth");
  for (const Ceiling& v : read_patterns) row(v, "read pattern");
  row(copy, "copy_bandwidth");
  row(copy_kernel, "copy_kernel_bandwidth");
  row(gemm, "gemm_bf16");
  if (read.value < 4300) {
    report.meta()["warning"] = "read ceiling below 4.3 TB/s: a weak ceiling (PERF.md)";
    std::printf("WARNING: read ceiling %.0f GB/s < 4300 GB/s\n", read.value);
  }
  std::printf("device: %s, %d SMs, L2 %d MiB\n", dev.name.c_str(), dev.sm_count, dev.l2_bytes >> 20);
  report.finish(args, {"name", "value", "unit", "median_us", "p10_us", "p90_us", "detail"});
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_ceilings: %s\n", e.what());
  return 1;
}
