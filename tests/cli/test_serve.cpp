// SPDX-License-Identifier: Apache-2.0
// `kvinfer serve` end to end: the built program is run with small traces; its exit
// code, messages and JSON report are checked (0 done, 1 check mismatch, 2 bad input,
// and no report file after a failure).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_run.hpp"
#include "kvinfer/core/device.hpp"

namespace {

namespace fs = std::filesystem;

using kvinfer::cli_test::Result;

// `kvinfer ARGS` without a time limit (the serve runs here are small, and a slow
// machine must not turn into a failure).
Result run(const std::string& args) {
  return kvinfer::cli_test::run_shell(kvinfer::cli_test::cli() + " " + args);
}

class Serve : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kvinfer_test_serve_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  static nlohmann::json read_json(const std::string& p) {
    std::ifstream f(p);
    return nlohmann::json::parse(f);
  }

  fs::path dir_;
};

// Small and quick: 2 threads at most, tiny model, few requests.
const std::string kSmall =
    "serve -q --device cpu --threads 2 --requests 10 --prompt-len 16:200 --gen-len 4:24 "
    "--prefix-len 64 --arrival-rate 3 ";

TEST_F(Serve, TinyRunWithCheckPassesAndWritesTheReport) {
  const std::string out = path("report.json");
  const Result r = run(kSmall + "--check --json " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(output_has(r, {"check:     passed", "tokens/s"}));
  const nlohmann::json j = read_json(out);
  EXPECT_GT(j["result"]["steps"].get<int>(), 0);
  EXPECT_GT(j["result"]["tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["result"]["generated_tokens"].get<int>(), 0);
  for (const char* phase : {"prefill", "decode"}) {
    const auto& p = j["attention"][phase];
    EXPECT_GT(p["steps"].get<int>(), 0) << phase;
    EXPECT_GT(p["ms_per_step_mean"].get<double>(), 0) << phase;
    EXPECT_GT(p["gflops_per_s"].get<double>(), 0) << phase;
    EXPECT_GT(p["gbytes_per_s"].get<double>(), 0) << phase;
  }
  EXPECT_GT(j["pages"]["peak_in_use"].get<int>(), 0);
  EXPECT_LE(j["pages"]["peak_in_use"].get<int>(), j["pages"]["num_pages"].get<int>());
  EXPECT_TRUE(j["check"]["passed"].get<bool>());
  EXPECT_GT(j["check"]["segments"].get<int>(), 0);
  EXPECT_EQ(j["config"]["model"]["name"], "tiny");
  EXPECT_TRUE(j["latency"].contains("ttft_s_mean"));
  // Written atomically: no temporary file is left next to it.
  for (const auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().filename(), "report.json");
}

TEST_F(Serve, SharedPrefixesGoThroughCascadeAndMatchTheOracle) {
  const std::string out = path("report.json");
  const Result r = run(kSmall + "--trace shared-prefix --prefix-groups 1 --check --json " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json j = read_json(out);
  EXPECT_GT(j["attention"]["cascade_rows"].get<int>(), 0);
  EXPECT_TRUE(j["check"]["passed"].get<bool>());
}

TEST_F(Serve, MlaPresetWithCheckPasses) {
  const Result r =
      run("serve -q --device cpu --threads 2 --preset mla-tiny --requests 4 --prompt-len 8:80 "
          "--gen-len 2:8 --prefix-len 64 --check");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("MLA"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("check:     passed"), std::string::npos) << r.output;
}

TEST_F(Serve, JsonAndCsvTraceFiles) {
  const std::string json = write("trace.json", R"({"requests": [
      {"arrival": 0, "prompt_len": 40, "gen_len": 5, "prefix_group": "sys", "prefix_len": 32},
      {"arrival": 1, "prompt_len": 50, "gen_len": 3, "prefix_group": "sys", "prefix_len": 32},
      {"arrival": 2, "prompt_len": 7, "gen_len": 1}]})");
  Result r = run("serve -q --device cpu --threads 2 --check --trace-file " + json);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3 requests"), std::string::npos) << r.output;
  const std::string csv = write("trace.csv",
                                "# a comment\narrival,prompt_len,gen_len,prefix_group,prefix_len\n"
                                "0,40,5,sys,32\n0,50,3,sys,32\n3,7,2,,\n");
  r = run("serve -q --device cpu --threads 2 --check --trace-file " + csv);
  ASSERT_EQ(r.code, 0) << r.output;
}

TEST_F(Serve, MalformedTraceIsBadInput) {
  const std::string out = path("report.json");
  const std::string broken = write("broken.json", R"({"requests": [{"prompt_len": 10, "gen_len": )");
  Result r = run("serve -q --device cpu --trace-file " + broken + " --json " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("not valid JSON"), std::string::npos) << r.output;

  const std::string zero = write("zero.json", R"([{"prompt_len": 0, "gen_len": 3}])");
  r = run("serve -q --device cpu --trace-file " + zero + " --json " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("requests[0]: prompt_len = 0"), std::string::npos) << r.output;

  const std::string typo = write("typo.json", R"([{"prompt_len": 5, "gen_len": 3, "promt": 1}])");
  r = run("serve -q --device cpu --trace-file " + typo);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown field \"promt\""), std::string::npos) << r.output;

  const std::string csv = write("bad.csv", "prompt_len,gen_len\n12,4\n12,x\n");
  r = run("serve -q --device cpu --trace-file " + csv);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.csv:3: gen_len = \"x\""), std::string::npos) << r.output;

  r = run("serve -q --device cpu --trace-file " + path("missing.json"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("cannot open"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(Serve, UnknownPresetAndImpossibleShapesAreBadInput) {
  Result r = run("serve -q --preset llama9-1t");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown preset"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("llama3-8b"), std::string::npos) << r.output;  // the known ones are listed

  r = run("serve -q --qo-heads 6 --kv-heads 4");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("multiple of kv heads"), std::string::npos) << r.output;

  r = run("serve -q --head-dim 100");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--head-dim = 100"), std::string::npos) << r.output;

  r = run("serve -q --kv-dtype int8");
  EXPECT_EQ(r.code, 2) << r.output;

  r = run("serve -q --trace nosuch");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown synthetic trace"), std::string::npos) << r.output;

  r = run("serve -q --prompt-len 9:3");
  EXPECT_EQ(r.code, 2) << r.output;

  r = run("serve -q --no-such-flag");
  EXPECT_EQ(r.code, 2) << r.output;
}

TEST_F(Serve, OutOfPagesIsBadInput) {
  const std::string out = path("report.json");
  const Result r = run("serve -q --device cpu --num-pages 4 --prompt-len 200:300 --json " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("out of pages"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(Serve, CheckMismatchFailsLoudlyAndWritesNoReport) {
  const std::string out = path("report.json");
  const Result r = run(kSmall + "--check --check-inject-fault --json " + out);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(output_has(r, {"CHECK FAILED", "float64 oracle"}));
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(dir_)) ADD_FAILURE() << "left behind: " << e.path();
}

TEST_F(Serve, UnwritableReportPathIsRejectedBeforeTheRun) {
  const Result r = run(kSmall + "--json " + path("no/such/dir/report.json"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
}

TEST_F(Serve, CudaDeviceWithoutAGpuIsBadInput) {
  if (kvinfer::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  const Result r = run("serve -q --device cuda");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--device = cuda"), std::string::npos) << r.output;
}

}  // namespace
