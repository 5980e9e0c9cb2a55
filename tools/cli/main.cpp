// SPDX-License-Identifier: Apache-2.0
// The `kvinfer` command-line program.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "input_error.hpp"
#include "kvinfer/kvinfer.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kvinfer: attention kernels over paged and ragged KV caches"};
  app.set_version_flag("--version",
                       fmt::format("kvinfer {} (backends: cpu{}; instance preset: {})", kvinfer::version(),
                                   kvinfer::cuda_backend_built() ? ", cuda" : "", kvinfer::instance_preset()),
                       "Print the version and exit");
  app.require_subcommand(1);
  int exit_code = kvinfer::cli::kExitOk;
  kvinfer::cli::add_info_command(app, exit_code);
  kvinfer::cli::add_serve_command(app, exit_code);
  // Messages name the command that was given ("kvinfer serve: error: ...").
  const auto command = [&app] {
    const std::vector<CLI::App*> sub = app.get_subcommands();
    return sub.empty() ? std::string("kvinfer") : "kvinfer " + sub.front()->get_name();
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kvinfer::cli::kExitBadInput;
  } catch (const kvinfer::cli::InputError& e) {
    // A flag's value rejected as it was parsed (flags.hpp).
    fmt::print(stderr, "{}: error: {}\n", command(), e.what());
    return kvinfer::cli::kExitBadInput;
  } catch (const kvinfer::Error& e) {
    fmt::print(stderr, "{}: error: {}\n", command(), e.what());
    return kvinfer::cli::kExitBadInput;
  }
  return exit_code;
}
