// SPDX-License-Identifier: Apache-2.0
// The trace reader of `kvinfer serve` (tools/cli/trace.cpp): JSON and CSV traces,
// read through load_trace_file() exactly as the program reads --trace-file, without
// running the engine. The first byte picks the format, the rest is the file. An
// InputError (the program's "bad input", exit status 2) is a rejected trace; any
// other exception, a crash or a sanitizer report is a finding. A trace it accepts
// must also satisfy validate_trace() (the reader runs it; the fuzzer checks that what
// comes back is ordered and within the trace's own rules).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli/input_error.hpp"
#include "cli/trace.hpp"

namespace {

// One scratch folder per fuzzing process, removed at exit. The name is never freed:
// the exit handler runs after static destructors would have run.
const std::string& scratch_dir() {
  static const std::string* const dir = [] {
    auto* tmpl = new std::string((std::filesystem::temp_directory_path() / "kvinfer-fuzz-trace-XXXXXX").string());
    if (mkdtemp(tmpl->data()) == nullptr) std::abort();
    std::atexit([] { std::filesystem::remove_all(*dir); });
    return tmpl;
  }();
  return *dir;
}

void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvinfer::cli;
  if (size == 0) return 0;
  const std::string path = scratch_dir() + ((data[0] & 1) != 0 ? "/trace.csv" : "/trace.json");
  write_file(path, data + 1, size - 1);
  Trace t;
  try {
    t = load_trace_file(path);
  } catch (const InputError&) {
    return 0;
  }
  // An accepted trace is what the engine may rely on.
  if (t.requests.empty()) std::abort();
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    const TraceRequest& r = t.requests[i];
    if (i > 0 && r.arrival < t.requests[i - 1].arrival) std::abort();
    if (r.prompt_len < 1 || r.gen_len < 1 || r.arrival < 0) std::abort();
    if (r.prefix_group < -1 || r.prefix_group >= std::int32_t(t.prefix_groups.size())) std::abort();
    if (r.prefix_group >= 0 && (r.prefix_len < 1 || r.prefix_len >= r.prompt_len)) std::abort();
  }
  return 0;
}
