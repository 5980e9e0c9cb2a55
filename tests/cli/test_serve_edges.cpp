// SPDX-License-Identifier: Apache-2.0
// `kvinfer` at its edges: every bad flag, path and trace file ends the program with
// exit code 2 and a message naming the flag (or file), the value and the rule; no
// signal, no hang, nothing overwritten that should not be.
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <array>
#include <regex>
#include <thread>
#include <vector>

#include "cli_run.hpp"
#include "kvinfer/kvinfer.hpp"

namespace kvinfer::cli_test {
namespace {

namespace fs = std::filesystem;

// A run of a second or less: one layer, two short requests; kTiny on the CPU with two threads.
const std::string kTinyShape = "serve -q --layers 1 --requests 2 --prompt-len 8:40 --gen-len 2:4 ";
const std::string kTiny = kTinyShape + "--device cpu --threads 2 ";

int cores() {
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

void expect_bad_input(const Result& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.code, 2) << r.output;
  for (const std::string& p : parts)
    EXPECT_TRUE(contains(r.output, p)) << "missing \"" << p << "\" in: " << r.output;
  EXPECT_FALSE(contains(r.output, "steps:")) << "the run went ahead: " << r.output;
}

TEST(CliVersion, PrintsTheLibraryVersion) {
  const Result r = run_cli("--version");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "kvinfer " + kvinfer::version())) << r.output;
  EXPECT_TRUE(contains(r.output, "instance preset")) << r.output;
}

// Each numeric flag with values out of its range or not numbers at all: the message
// names the flag, the value as given and the range.
TEST(CliNumericFlags, OutOfRangeOrMalformedValuesNameTheFlagAndTheRange) {
  struct Bad {
    std::string flag, value, range;
  };
  const std::string threads_max = std::to_string(4 * cores());
  const std::vector<Bad> cases = {
      {"--kv-memory", "inf", "(0, 16777216]"},
      {"--kv-memory", "1e20", "(0, 16777216]"},
      {"--kv-memory", "0", "(0, 16777216]"},
      {"--kv-memory", "nan", "(0, 16777216]"},
      {"--seed", "-1", "[0, 18446744073709551615]"},
      {"--seed", "18446744073709551616", "[0, 18446744073709551615]"},
      {"--seed", "1.5", "[0, 18446744073709551615]"},
      {"--page-size", "0", "[1, 1024]"},
      {"--page-size", "1e20", "[1, 1024]"},
      {"--page-size", "2048", "[1, 1024]"},
      {"--threads", "-1", "[0, " + threads_max + "]"},
      {"--threads", "100000", "[0, " + threads_max + "]"},
      {"--requests", "0", "[1, 1000000]"},
      {"--requests", "3.5", "[1, 1000000]"},
      {"--num-pages", "-1", "[0, 1073741824]"},
      {"--max-batch", "0", "[1, 65536]"},
      {"--max-prefill-tokens", "0", "[1, 1048576]"},
      {"--check-every", "0", "[1, 1000000000]"},
      {"--layers", "0", "[1, 1024]"},
      {"--qo-heads", "5000", "[1, 1024]"},
      {"--kv-heads", "0", "[1, 1024]"},
      {"--head-dim", "8", "[16, 512]"},
      {"--arrival-rate", "-1", "[0, 1000000]"},
      {"--arrival-rate", "inf", "[0, 1000000]"},
      {"--prefix-len", "0", "[1, 1048576]"},
      {"--prefix-groups", "0", "[1, 65536]"},
      {"--prompt-len", "0:5", "[1, 1048576]"},
      {"--prompt-len", "9:3", "MIN <= MAX"},
      {"--gen-len", "1:99999999999", "[1, 1048576]"},
      {"--gen-len", "x", "[1, 1048576]"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.flag + " " + b.value);
    // Given alone: a flag given twice is CLI11's error.
    const Result r = run_cli("serve -q --device cpu " + b.flag + " " + b.value);
    expect_bad_input(r, {b.flag + " = " + b.value + ": must be", b.range});
  }
}

TEST(CliThreads, BoundedByTheHardware) {
  const int over = 4 * cores() + 1;
  Result r = run_cli(kTinyShape + "--device cpu --threads " + std::to_string(over));
  expect_bad_input(r, {"--threads = " + std::to_string(over), "at most 4x the cores"});
  // The library reads KVINFER_NUM_THREADS itself: the same bounds hold for it.
  r = run_shell("KVINFER_NUM_THREADS=100000 " + cli() + " " +
                "serve -q --device cpu --layers 1 --requests 2 --prompt-len 8:40 --gen-len 2:4");
  expect_bad_input(r, {"KVINFER_NUM_THREADS = 100000: must be an integer in [0, "});
}

// With 1 GiB thread stacks and 2 GiB of address space at most one more thread can
// start: the program says so and exits 2 instead of failing inside the thread pool.
TEST(CliThreads, ThreadsThatCannotStartAreACleanError) {
  const int threads = 4 * cores();
  const Result r = run_shell("ulimit -s 1048576 && ulimit -v 2097152 && exec timeout 60 " + cli() + " " +
                             kTinyShape + "--device cpu --threads " + std::to_string(threads));
  expect_bad_input(
      r, {"--threads = " + std::to_string(threads) + ": cannot start the threads", "lower --threads"});
}

TEST(CliDevice, CudaWithAnIndexIsAccepted) {
  Result r = run_cli(kTinyShape + "--device cuda:x");
  expect_bad_input(r, {"--device = cuda:x: must be cpu, cuda, cuda:N (N >= 0) or auto"});
  r = run_cli(kTinyShape + "--device cuda:-1");
  expect_bad_input(r, {"--device = cuda:-1: must be"});
  if (!kvinfer::cuda_backend_built()) {
    r = run_cli(kTinyShape + "--device cuda:0");
    expect_bad_input(r, {"--device = cuda:0: this build has no CUDA backend"});
    return;
  }
  const int gpus = kvinfer::cuda_device_count();
  r = run_cli(kTinyShape + "--device cuda:" + std::to_string(gpus));
  expect_bad_input(
      r, {"--device = cuda:" + std::to_string(gpus) + ":", gpus == 0 ? "no GPU found" : "no such GPU"});
  if (gpus == 0) return;
  for (const char* name : {"cuda", "cuda:0"}) {
    r = run_cli(kTinyShape + "--device " + name);
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "on cuda:0")) << r.output;
  }
}

// ---------------------------------------------------------------- --json
class CliJson : public TempDirTest {};

TEST_F(CliJson, RefusesDevicesAndDirectoriesBeforeTheRun) {
  if (fs::exists("/dev/full")) {
    const Result r = run_cli(kTiny + "--json /dev/full");
    expect_bad_input(r, {"--json = /dev/full: is a character device", "only a regular file or a new one"});
    EXPECT_TRUE(fs::is_character_file("/dev/full")) << "/dev/full was replaced";
  }
  Result r = run_cli(kTiny + "--json " + dir_.string());
  expect_bad_input(r, {"is a directory"});
  fs::create_symlink("/dev/null", path("null.json"));
  r = run_cli(kTiny + "--json " + path("null.json"));
  expect_bad_input(r, {"(-> /dev/null): is a character device"});
  EXPECT_TRUE(fs::is_symlink(path("null.json")));
}

TEST_F(CliJson, UnwritableDirectoryIsFoundBeforeTheRun) {
  // /sys refuses new files even to root (chmod does not stop root).
  if (fs::is_directory("/sys")) {
    const Result r = run_cli(kTiny + "--json /sys/kvinfer-report.json");
    expect_bad_input(r, {"--json = /sys/kvinfer-report.json: cannot create a file in /sys"});
  }
  if (::geteuid() != 0) {
    fs::create_directories(path("ro"));
    fs::permissions(path("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    const Result r = run_cli(kTiny + "--json " + path("ro/report.json"));
    expect_bad_input(r, {"cannot create a file in"});
  }
  const Result r = run_cli(kTiny + "--json " + path("missing/report.json"));
  expect_bad_input(r, {"directory " + path("missing") + " does not exist"});
}

// Symlinks are followed, as a shell's `>` follows them: the file pointed to is
// written (created when missing), the link stays a link.
TEST_F(CliJson, SymlinksAreFollowed) {
  write("target.json", "old");
  fs::create_symlink("target.json", path("link.json"));
  fs::create_symlink(path("new/created.json"), path("dangling.json"));
  fs::create_directories(path("new"));
  for (const char* link : {"link.json", "dangling.json"}) {
    const Result r = run_cli(kTiny + "--json " + path(link));
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_TRUE(fs::is_symlink(path(link))) << link << " was replaced";
  }
  for (const char* file : {"target.json", "new/created.json"}) {
    std::ifstream f(path(file));
    EXPECT_GT(nlohmann::json::parse(f)["result"]["steps"].get<int>(), 0) << file;
  }
}

// The replacement is atomic (a temporary file in the same directory, renamed) and
// keeps the replaced file's mode; nothing else is left in the directory.
TEST_F(CliJson, ReplacesAFileAtomicallyKeepingItsMode) {
  const std::string out = write("report.json", "old");
  fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  const Result r = run_cli(kTiny + "--json " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  std::ifstream f(out);
  EXPECT_TRUE(nlohmann::json::parse(f).contains("series"));
  for (const auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().filename(), "report.json");
}

// ---------------------------------------------------------------- trace files
class CliTraceFile : public TempDirTest {
 protected:
  Result run_trace(const std::string& file) {
    return run_cli("serve -q --device cpu --threads 2 --layers 1 --trace-file " + file, 60);
  }
};

TEST_F(CliTraceFile, KindAndSizeAreCheckedBeforeReading) {
  if (fs::exists("/dev/zero")) {
    expect_bad_input(run_trace("/dev/zero"),
                     {"--trace-file = /dev/zero: is a character device, not a regular file"});
  }
  fs::create_directories(path("x.json"));
  expect_bad_input(run_trace(path("x.json")), {"x.json: is a directory, not a file"});
  expect_bad_input(run_trace(path("none.csv")), {"none.csv: cannot open the file: no such file"});
  // A sparse file: its size is what stat says, no disk is used.
  { std::ofstream(path("huge.csv")); }
  fs::resize_file(path("huge.csv"), std::uintmax_t(200) << 20);
  expect_bad_input(run_trace(path("huge.csv")), {"huge.csv: 200.0 MiB", "more than the limit of 128.0 MiB"});
  expect_bad_input(run_trace(write("trace.txt", "[]")), {"trace.txt: unknown format (name it .json or .csv"});
}

TEST_F(CliTraceFile, ExtensionInAnyCase) {
  Result r =
      run_trace(write("UPPER.JSON", R"([{"prompt_len": 9, "gen_len": 2}, {"prompt_len": 5, "gen_len": 3}])"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "2 requests")) << r.output;
  r = run_trace(write("Mixed.Csv", "prompt_len,gen_len\n9,2\n"));
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST_F(CliTraceFile, JsonDuplicateKeysDepthAndOverflowAreErrors) {
  expect_bad_input(run_trace(write("dup.json", R"([{"prompt_len": 5, "gen_len": 2, "prompt_len": 6}])")),
                   {"dup.json: key \"prompt_len\" appears twice in one object"});
  expect_bad_input(run_trace(write("dup2.json", R"({"requests": [], "requests": []})")),
                   {"key \"requests\" appears twice"});
  expect_bad_input(run_trace(write("deep.json", std::string(5000, '[') + std::string(5000, ']'))),
                   {"deep.json: nested deeper than 16 levels"});
  expect_bad_input(run_trace(write("inf.json", R"([{"prompt_len": 1e999, "gen_len": 2}])")),
                   {"inf.json: a number out of range", "1e999"});
  expect_bad_input(run_trace(write("big.json", R"([{"prompt_len": 5, "gen_len": 99999999999999999999}])")),
                   {"requests[0]: gen_len = 1e+20: must be an integer within 64 bits"});
  expect_bad_input(run_trace(write("u64.json", R"([{"prompt_len": 5, "gen_len": 18446744073709551615}])")),
                   {"requests[0]: gen_len = 18446744073709551615: must be an integer within 64 bits"});
}

// A spreadsheet's export: byte-order mark, quoted header names, CRLF, a quoted group
// name with a comma and a doubled quote, comments and blank lines between records.
TEST_F(CliTraceFile, CsvWithBomQuotesAndCrlf) {
  const std::string csv =
      write("sheet.csv",
            "\xEF\xBB\xBF\"arrival\",\"prompt_len\",\"gen_len\",\"prefix_group\",\"prefix_len\"\r\n"
            "0,40,5,\"sys, \"\"v1\"\"\",32\r\n"
            "# a comment\r\n"
            "\r\n"
            "0, \"50\" ,3,\"sys, \"\"v1\"\"\",32\r\n"
            "3,7,2,,\r\n");
  const Result r = run_trace(csv + " --check");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "3 requests")) << r.output;
  EXPECT_TRUE(contains(r.output, "shared prefixes: sys, \"v1\" (32 tokens, 2 requests)")) << r.output;
}

TEST_F(CliTraceFile, MalformedCsvNamesTheLine) {
  // (file, contents, the message naming the line)
  const std::array<std::string, 3> cases[] = {
      {"open.csv", "prompt_len,gen_len\n5,\"2\n", "open.csv:2: a quoted field is not closed"},
      {"stray.csv", "prompt_len,gen_len\n5,2\n6,3\"x\n", "stray.csv:3: a quote inside an unquoted field"},
      {"after.csv", "prompt_len,gen_len\n5,\"2\"x\n", "after.csv:2: 'x' after the closing quote"},
      {"cr.csv", "prompt_len,gen_len\n5,2\r6,3\n", "cr.csv:2: a carriage return without a line feed"},
      {"fields.csv", "prompt_len,gen_len\n5,2,7\n", "fields.csv:2: 3 fields, the header has 2"},
      {"over.csv", "prompt_len,gen_len\n5,99999999999999999999\n",
       "over.csv:2: gen_len = \"99999999999999999999\": must be an integer within 64 bits"},
  };
  for (const auto& [file, text, message] : cases) expect_bad_input(run_trace(write(file, text)), {message});
}

// ---------------------------------------------------------------- progress, series
class CliProgress : public TempDirTest {};

TEST_F(CliProgress, NoControlCodesWhenNotATerminal) {
  const Result r =
      run_cli("serve --device cpu --threads 2 --layers 2 --requests 4 --prompt-len 8:40 --gen-len 2:8");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "\r")) << r.output;
  EXPECT_FALSE(contains(r.output, "ETA")) << r.output;
}

// On a terminal (a pseudo-terminal from util-linux `script`) the bar moves within the
// steps, layer by layer, with an ETA; -q silences it.
TEST_F(CliProgress, BarWithEtaOnATerminal) {
  if (run_shell("command -v script").code != 0) GTEST_SKIP() << "util-linux `script` not found";
  const std::string args =
      "serve --device cpu --threads 2 --layers 4 --requests 8 --prompt-len 64:400 --gen-len 8:32";
  Result r = run_shell("script -qec '" + cli() + " " + args + "' /dev/null");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "% ETA ")) << r.output;
  // The bar shows the layer of the step it is drawn in; which ones a run's redraws
  // catch depends on its speed.
  EXPECT_TRUE(std::regex_search(r.output, std::regex("layer [1-4]/4"))) << r.output;
  EXPECT_TRUE(contains(r.output, "[#")) << r.output;
  EXPECT_TRUE(contains(r.output, "tokens/s")) << r.output;
  r = run_shell("script -qec '" + cli() + " -q " + args + "' /dev/null");
  EXPECT_NE(r.code, 0) << "-q belongs to serve: " << r.output;
  r = run_shell("script -qec '" + cli() + " " + args + " -q' /dev/null");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "ETA")) << r.output;
}

TEST_F(CliProgress, ReportHoldsPerStepSeries) {
  const std::string out = path("report.json");
  const Result r = run_cli(
      "serve -q --device cpu --threads 2 --layers 2 --requests 8 --prompt-len 16:200 --gen-len 2:16 "
      "--trace shared-prefix --prefix-len 32 --json " +
      out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(out);
  const nlohmann::json j = nlohmann::json::parse(f);
  const nlohmann::json& s = j["series"];
  const std::size_t steps = j["result"]["steps"].get<std::size_t>();
  ASSERT_GT(steps, 1u);
  for (const char* key : {"step", "t_s", "batch", "prefill_tokens", "decode_tokens", "step_ms", "plan_ms",
                          "append_ms", "prefill_ms", "decode_ms", "pages_in_use"}) {
    ASSERT_TRUE(s.contains(key)) << key;
    EXPECT_EQ(s[key].size(), steps) << key;
  }
  std::int64_t prefill_tokens = 0, decode_tokens = 0, peak_pages = 0, peak_batch = 0;
  double prefill_ms = 0, decode_ms = 0;
  for (std::size_t i = 0; i < steps; ++i) {
    if (i > 0) EXPECT_GT(s["step"][i].get<std::int64_t>(), s["step"][i - 1].get<std::int64_t>());
    if (i > 0) EXPECT_GE(s["t_s"][i].get<double>(), s["t_s"][i - 1].get<double>());
    EXPECT_GE(s["batch"][i].get<std::int64_t>(), 1);
    EXPECT_GE(s["step_ms"][i].get<double>(),
              s["prefill_ms"][i].get<double>() + s["decode_ms"][i].get<double>());
    prefill_tokens += s["prefill_tokens"][i].get<std::int64_t>();
    decode_tokens += s["decode_tokens"][i].get<std::int64_t>();
    peak_pages = std::max(peak_pages, s["pages_in_use"][i].get<std::int64_t>());
    peak_batch = std::max(peak_batch, s["batch"][i].get<std::int64_t>());
    prefill_ms += s["prefill_ms"][i].get<double>();
    decode_ms += s["decode_ms"][i].get<double>();
  }
  EXPECT_EQ(peak_pages, j["pages"]["peak_in_use"].get<std::int64_t>());
  EXPECT_EQ(peak_batch, j["result"]["peak_batch"].get<std::int64_t>());
  // Prefill rows are the prompt tokens; each request's first token comes from its
  // prefill, the others from decode rows.
  const auto& res = j["result"];
  EXPECT_EQ(prefill_tokens, res["prompt_tokens"].get<std::int64_t>());
  EXPECT_EQ(decode_tokens + j["config"]["trace"]["requests"].get<std::int64_t>(),
            res["generated_tokens"].get<std::int64_t>());
  EXPECT_NEAR(prefill_ms, 1e3 * j["attention"]["prefill"]["total_s"].get<double>(), 1e-6 * prefill_ms + 1e-9);
  EXPECT_NEAR(decode_ms, 1e3 * j["attention"]["decode"]["total_s"].get<double>(), 1e-6 * decode_ms + 1e-9);
}

}  // namespace
}  // namespace kvinfer::cli_test
