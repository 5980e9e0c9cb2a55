// SPDX-License-Identifier: Apache-2.0
// Running the built `kvinfer` program from a test: its exit code (a signal is never
// an exit code: -1) and its output, and a scratch directory per test.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

namespace kvinfer::cli_test {

struct Result {
  int code = -1;  // the exit status; -1 when killed by a signal
  std::string output;
};

// Runs `command` through /bin/sh, stdout and stderr together.
inline Result run_shell(const std::string& command) {
  Result r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string cli() {
  return KVINFER_CLI_PATH;
}

// `kvinfer ARGS`, with a time limit: a hang is a failure (exit code 124), not a stuck test.
inline Result run_cli(const std::string& args, int timeout_s = 120) {
  return run_shell("timeout " + std::to_string(timeout_s) + " " + cli() + " " + args);
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// r's output has every one of `parts` (the failure names the first missing one).
inline ::testing::AssertionResult output_has(const Result& r, std::initializer_list<std::string> parts) {
  for (const std::string& p : parts) {
    if (!contains(r.output, p)) return ::testing::AssertionFailure() << "missing \"" << p << "\" in: " << r.output;
  }
  return ::testing::AssertionSuccess();
}

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() / (std::string("kvinfer_cli_") + info->test_suite_name() +
                                                     "_" + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }

  std::filesystem::path dir_;
};

}  // namespace kvinfer::cli_test
