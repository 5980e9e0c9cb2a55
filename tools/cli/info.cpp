// SPDX-License-Identifier: Apache-2.0
// `kvinfer info`: version, backends compiled in, instance preset, GPUs found.
#include <fmt/format.h>

#include "commands.hpp"
#include "kvinfer/kvinfer.hpp"

namespace kvinfer::cli {

void add_info_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("info", "Print version, compiled backends and GPUs found");
  cmd->callback([&exit_code] {
    fmt::print("kvinfer {}\n", version());
    fmt::print("backends:        cpu{}\n", cuda_backend_built() ? ", cuda" : "");
    fmt::print("instance preset: {}\n", instance_preset());
    fmt::print("GPUs found:      {}\n", cuda_device_count());
    fmt::print("default device:  {}\n", to_string(default_device()));
    exit_code = kExitOk;
  });
}

}  // namespace kvinfer::cli
