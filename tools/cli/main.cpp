// SPDX-License-Identifier: Apache-2.0
// The `kvinfer` command-line program.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "kvinfer/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kvinfer: attention kernels over paged and ragged KV caches"};
  app.require_subcommand(1);
  int exit_code = kvinfer::cli::kExitOk;
  kvinfer::cli::add_info_command(app, exit_code);
  kvinfer::cli::add_serve_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kvinfer::cli::kExitBadInput;
  } catch (const kvinfer::Error& e) {
    fmt::print(stderr, "kvinfer: error: {}\n", e.what());
    return kvinfer::cli::kExitBadInput;
  }
  return exit_code;
}
