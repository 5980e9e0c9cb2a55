// SPDX-License-Identifier: Apache-2.0
// tools/plot/plot_serve.py on a real report: a PNG comes out; a file that is not a
// report is bad input (exit 2). Skipped where python3 or matplotlib is missing
// (matplotlib is not among the CI machine's packages).
#include <nlohmann/json.hpp>

#include "cli_run.hpp"

namespace kvinfer::cli_test {
namespace {

const std::string kScript = std::string(KVINFER_SOURCE_DIR) + "/tools/plot/plot_serve.py";

class PlotServe : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    if (run_shell("python3 -c 'import matplotlib'").code != 0)
      GTEST_SKIP() << "python3 with matplotlib not found";
  }
};

TEST_F(PlotServe, DrawsTheSeriesOfARun) {
  const std::string report = path("report.json"), png = path("serve.png");
  Result r = run_cli(
      "serve -q --device cpu --threads 2 --layers 2 --requests 6 --prompt-len 16:200 --gen-len 2:16 --json " +
      report);
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* extra : {"", " --x time --log"}) {
    std::filesystem::remove(png);
    r = run_shell("python3 " + kScript + " " + report + " -o " + png + extra);
    ASSERT_EQ(r.code, 0) << r.output;
    std::ifstream f(png, std::ios::binary);
    std::string head(8, '\0');
    f.read(head.data(), 8);
    EXPECT_EQ(head, "\x89PNG\r\n\x1a\n") << "not a PNG";
    EXPECT_GT(std::filesystem::file_size(png), 10000u);
  }
}

TEST_F(PlotServe, AFileThatIsNotAReportIsBadInput) {
  Result r = run_shell("python3 " + kScript + " " + write("x.json", R"({"result": {}})"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "no \"series\"")) << r.output;
  r = run_shell("python3 " + kScript + " " + write("y.json", "{"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "not valid JSON")) << r.output;
  r = run_shell("python3 " + kScript + " " +
                write("z.json", R"({"series": {"step": [1]}, "pages": {"num_pages": 4}})"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "the series lack")) << r.output;
  r = run_shell("python3 " + kScript + " " + path("missing.json"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_FALSE(std::filesystem::exists(path("missing.png")));
}

}  // namespace
}  // namespace kvinfer::cli_test
