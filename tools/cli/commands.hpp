// SPDX-License-Identifier: Apache-2.0
// Subcommands of the `kvinfer` program. Each adds itself to the CLI11 app and
// returns the exit code through the callback it installs.
#pragma once

#include <CLI/CLI.hpp>

namespace kvinfer::cli {

// Exit codes: 0 success, 1 a failed check or run, 2 bad input.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

void add_info_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);

}  // namespace kvinfer::cli
