// SPDX-License-Identifier: Apache-2.0
// `kvinfer serve`: a serving simulation over the whole library. A model shape, a
// request trace, a page pool and continuous batching drive the attention wrappers
// step by step (engine.hpp); the report gives tokens/s, attention time per step,
// achieved bandwidth and FLOP/s, and peak pages in use. Exit codes: 0 done, 1 a
// --check mismatch or a failed run, 2 bad input.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <new>
#include <optional>
#include <system_error>
#include <thread>

#include "commands.hpp"
#include "engine.hpp"
#include "files.hpp"
#include "flags.hpp"
#include "input_error.hpp"
#include "kvinfer/kvinfer.hpp"
#include "model_preset.hpp"
#include "oracle_check.hpp"
#include "page_allocator.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "scheduler.hpp"
#include "trace.hpp"

namespace kvinfer::cli {
namespace {

struct ServeArgs {
  std::string preset = "tiny";
  ModelOverrides model;
  std::string device = "auto";
  int threads = 0;
  std::optional<int> page_size;  // default: 16, MLA 64
  std::int64_t num_pages = 0;    // 0: enough for the trace within --kv-memory
  double kv_memory_mib = 4096;
  std::string trace = "mixed";
  std::string trace_file;
  SyntheticTraceOptions synthetic;
  std::string prompt_len = "64:1024", gen_len = "16:128";
  int max_batch = 32;
  int max_prefill_tokens = 2048;
  bool no_cascade = false;
  bool no_prefix_sharing = false;
  bool check = false;
  bool check_inject_fault = false;
  std::int64_t check_every = 1;
  std::string json_path;
  bool quiet = false;
  bool list = false;
  std::uint64_t seed = 1;
};

// Token counts of the synthetic traces' ranges (as trace files: trace.cpp).
const Bounds<std::int32_t> kTokenBounds{1, 1 << 20};

int hardware_threads() {
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

// More threads than this are a mistake, not a configuration: a thread per unit of
// work (--threads 100000) exhausted the machine's process limit.
Bounds<int> thread_bounds() {
  const int cores = hardware_threads();
  return {0, 4 * cores, false, fmt::format("0: all {} cores; at most 4x the cores", cores)};
}

// The threads the CPU backend will start, started once here and released: a machine
// that cannot start them (a process or memory limit) is told apart before any work,
// with the flag to lower, instead of failing inside the thread pool.
void check_threads_start(const std::string& flag, int threads) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<std::thread> started;
  started.reserve(std::size_t(std::max(threads - 1, 0)));
  std::string failure;
  try {
    for (int i = 1; i < threads; ++i) {
      started.emplace_back([&] {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return release; });
      });
    }
  } catch (const std::system_error& e) {
    failure = e.what();
  }
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  for (std::thread& t : started) t.join();
  if (!failure.empty()) {
    throw InputError(fmt::format(
        "{} = {}: cannot start the threads: {} of {} started ({}); lower {} or raise the process limits",
        flag, threads, started.size() + 1, threads, failure, flag));
  }
}

// Why the CUDA backend cannot serve `model` (empty when it can): a one-request
// prefill and decode of the model's shape is attempted on the GPU, so the answer
// follows the kernels actually compiled in rather than a list kept here.
std::string cuda_cannot_serve(const ModelShape& model, Device gpu) {
  try {
    if (model.kind == AttentionKind::kMla) {
      const std::int64_t h = model.num_qo_heads, dc = model.head_dim_ckv, dp = model.head_dim_kpe;
      std::int32_t qo[] = {0, 2}, kvp[] = {0, 1}, lens[] = {2};
      const Tensor ids = Tensor::zeros({1}, DType::kI32, gpu);
      BatchMLAPagedAttention w(gpu);
      w.plan({.qo_indptr = TensorView(qo, DType::kI32, {2}),
              .kv_indptr = TensorView(kvp, DType::kI32, {2}),
              .kv_indices = ids,
              .kv_len = TensorView(lens, DType::kI32, {1}),
              .num_heads = h,
              .head_dim_ckv = dc,
              .head_dim_kpe = dp,
              .page_size = 16,
              .sm_scale = model.sm_scale(),
              .q_dtype = model.q_dtype,
              .kv_dtype = model.kv_dtype});
      const Tensor q_nope = Tensor::zeros({2, h, dc}, model.q_dtype, gpu),
                   out = Tensor::zeros({2, h, dc}, model.q_dtype, gpu);
      const Tensor q_pe = dp ? Tensor::zeros({2, h, dp}, model.q_dtype, gpu) : Tensor();
      const Tensor ckv = Tensor::zeros({1, 16, dc}, model.kv_dtype, gpu);
      const Tensor kpe = dp ? Tensor::zeros({1, 16, dp}, model.kv_dtype, gpu) : Tensor();
      w.run(q_nope, q_pe, dp ? MLACache::pair(ckv, kpe) : MLACache{ckv.view(), {}}, out);
      return {};
    }
    std::int32_t qo[] = {0, 2}, indptr[] = {0, 1}, last[] = {2};
    const Tensor ids = Tensor::zeros({1}, DType::kI32, gpu);
    const PageTable table{TensorView(indptr, DType::kI32, {2}), ids, TensorView(last, DType::kI32, {1})};
    BatchPrefillWithPagedKVCache prefill(gpu);
    prefill.plan({.qo_indptr = TensorView(qo, DType::kI32, {2}),
                  .page_table = table,
                  .num_qo_heads = model.num_qo_heads,
                  .num_kv_heads = model.num_kv_heads,
                  .head_dim = model.head_dim,
                  .page_size = 16,
                  .options = {.mask_mode = MaskMode::kCausal},
                  .q_dtype = model.q_dtype,
                  .kv_dtype = model.kv_dtype,
                  .o_dtype = model.q_dtype});
    BatchDecodeWithPagedKVCache decode(gpu);
    decode.plan({.page_table = table,
                 .num_qo_heads = model.num_qo_heads,
                 .num_kv_heads = model.num_kv_heads,
                 .head_dim = model.head_dim,
                 .page_size = 16,
                 .q_dtype = model.q_dtype,
                 .kv_dtype = model.kv_dtype,
                 .o_dtype = model.q_dtype});
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

// cpu, cuda (= cuda:0), cuda:N, or auto: the GPU when the CUDA backend is built, a
// GPU is found and its kernels serve the model; otherwise the CPU, saying why.
Device resolve_device(const std::string& name, const ModelShape& model) {
  if (name == "cpu") return Device::cpu();
  if (name == "auto") {
    if (default_device().is_cpu()) return Device::cpu();
    const std::string why = cuda_cannot_serve(model, Device::cuda(0));
    if (why.empty()) return Device::cuda(0);
    fmt::print(stderr, "kvinfer serve: --device auto runs on the CPU: {}\n", why);
    return Device::cpu();
  }
  int index = 0;
  if (name != "cuda") {
    const std::string_view n(name);
    const bool prefixed = n.starts_with("cuda:") && n.size() > 5;
    const auto [end, ec] =
        prefixed ? std::from_chars(n.data() + 5, n.data() + n.size(), index) : std::from_chars_result{};
    if (!prefixed || ec != std::errc() || end != n.data() + n.size() || index < 0) {
      throw InputError(fmt::format("--device = {}: must be cpu, cuda, cuda:N (N >= 0) or auto", name));
    }
  }
  if (!cuda_backend_built()) {
    throw InputError(fmt::format(
        "--device = {}: this build has no CUDA backend (configure with -DKVINFER_CUDA=ON)", name));
  }
  const int count = cuda_device_count();
  if (count == 0) throw InputError(fmt::format("--device = {}: no GPU found", name));
  if (index >= count) {
    throw InputError(fmt::format("--device = {}: no such GPU ({} found: cuda:0{})", name, count,
                                 count > 1 ? fmt::format(" to cuda:{}", count - 1) : ""));
  }
  return Device::cuda(index);
}

void print_catalogue() {
  fmt::print("model presets (--preset):\n");
  for (const ModelPresetInfo& p : model_presets()) fmt::print("  {:<12} {}\n", p.name, p.summary);
  fmt::print("synthetic traces (--trace):\n");
  for (const TraceInfo& t : synthetic_traces()) fmt::print("  {:<14} {}\n", t.name, t.summary);
}

// The prompt and generated tokens a run processes, the progress bar's 100%: each
// request's prompt and generated tokens, a shared prefix's whole pages once per group
// (exact while a group's prefix stays in the pool; it is filled again after all of
// its members finished, which the bar absorbs by stopping short of 100%).
std::int64_t expected_tokens(const Trace& t, const SchedulerOptions& o) {
  std::int64_t total = 0;
  std::vector<std::int32_t> group_shared(t.prefix_groups.size(), 0);
  for (const TraceRequest& r : t.requests) {
    total += std::int64_t(r.prompt_len) + r.gen_len;
    if (o.share_prefixes && r.prefix_group >= 0) {
      const std::int32_t shared = r.prefix_len / o.page_size * o.page_size;
      total -= shared;
      group_shared[std::size_t(r.prefix_group)] = shared;
    }
  }
  for (std::int32_t shared : group_shared) total += shared;
  return total;
}

std::string trace_line(const Trace& t) {
  std::int64_t prompt = 0, gen = 0;
  std::int32_t max_prompt = 0;
  for (const TraceRequest& r : t.requests) {
    prompt += r.prompt_len;
    gen += r.gen_len;
    max_prompt = std::max(max_prompt, r.prompt_len);
  }
  std::string groups;
  for (const PrefixGroup& g : t.prefix_groups) {
    if (g.members > 0)
      groups += fmt::format("{}{} ({} tokens, {} requests)", groups.empty() ? "" : ", ", g.name, g.prefix_len,
                            g.members);
  }
  return fmt::format(
      "{}: {} requests, {} prompt tokens (longest {}), {} to generate, arrivals over {} steps{}", t.source,
      t.requests.size(), prompt, max_prompt, gen, t.requests.back().arrival + 1,
      groups.empty() ? "" : "; shared prefixes: " + groups);
}

int run_serve(const ServeArgs& a) {
  if (a.list) {
    print_catalogue();
    return kExitOk;
  }
  // ---- configuration (every check before anything is allocated or run; the flags'
  // ranges are checked as they are parsed: flags.hpp)
  int threads = a.threads;
  if (threads == 0) {
    // The library reads KVINFER_NUM_THREADS itself: held to the flag's bounds here.
    if (const char* env = std::getenv("KVINFER_NUM_THREADS"); env != nullptr && *env != '\0') {
      threads = parse_number("KVINFER_NUM_THREADS", env, thread_bounds());
    }
  }
  if (threads == 0) threads = hardware_threads();
  ::setenv("KVINFER_NUM_THREADS", std::to_string(threads).c_str(), 1);
  const ModelShape model = make_model(a.preset, a.model);
  const Device device = resolve_device(a.device, model);
  if (device.is_cpu()) check_threads_start(a.threads > 0 ? "--threads" : "KVINFER_NUM_THREADS", threads);
  const bool mla = model.kind == AttentionKind::kMla;
  const std::int32_t page_size = a.page_size.value_or(mla ? 64 : 16);
  std::optional<OutputTarget> json_target;
  if (!a.json_path.empty()) json_target = check_output_path("--json", a.json_path);

  Trace trace;
  if (!a.trace_file.empty()) {
    trace = load_trace_file(a.trace_file);
  } else {
    SyntheticTraceOptions o = a.synthetic;
    o.name = a.trace;
    o.seed = a.seed;
    std::tie(o.prompt_min, o.prompt_max) = parse_int_range("--prompt-len", a.prompt_len, kTokenBounds);
    std::tie(o.gen_min, o.gen_max) = parse_int_range("--gen-len", a.gen_len, kTokenBounds);
    trace = make_synthetic_trace(o);
  }

  // ---- page pool: as given, or enough to hold the whole trace at once within --kv-memory
  const std::int64_t page_bytes =
      std::int64_t(page_size) * model.kv_bytes_per_token_layer() * model.num_layers;
  // --kv-memory is bounded (flags): the page count stays a finite int64.
  const auto budget_pages = std::int64_t(a.kv_memory_mib * double(1 << 20) / double(page_bytes));
  SchedulerOptions so{.page_size = page_size,
                      .max_batch = a.max_batch,
                      .max_prefill_tokens = a.max_prefill_tokens,
                      .share_prefixes = !a.no_prefix_sharing};
  std::int64_t num_pages = a.num_pages;
  if (num_pages == 0) {
    std::int64_t all = 0;
    for (const TraceRequest& r : trace.requests) all += pages_needed(r, so);
    num_pages = std::max<std::int64_t>(1, std::min(all, budget_pages));
  } else if (num_pages > budget_pages) {
    throw InputError(fmt::format("--num-pages = {}: {:.1f} MiB of KV cache, more than --kv-memory ({} MiB)",
                                 num_pages, double(num_pages * page_bytes) / double(1 << 20),
                                 a.kv_memory_mib));
  }

  PageAllocator pool(std::int32_t(num_pages), a.seed);
  Scheduler scheduler(trace, so, pool);  // throws when a request can never fit
  std::int32_t max_prompt = 0;
  for (const TraceRequest& r : trace.requests) max_prompt = std::max(max_prompt, r.prompt_len);
  EngineOptions eo{.device = device,
                   .page_size = page_size,
                   .num_pages = std::int32_t(num_pages),
                   .max_step_rows = std::max<std::int64_t>(a.max_prefill_tokens, max_prompt) + a.max_batch,
                   .cascade = !a.no_cascade,
                   .seed = a.seed};
  std::optional<Engine> engine;
  try {
    engine.emplace(model, eo);
  } catch (const std::bad_alloc&) {
    throw InputError(fmt::format(
        "cannot allocate the KV cache: {} pages of {} tokens x {} layers = {:.1f} MiB "
        "(lower --num-pages or --kv-memory)",
        num_pages, page_size, model.num_layers, double(num_pages * page_bytes) / double(1 << 20)));
  }
  std::optional<OracleCheck> check;
  if (a.check) check.emplace(model, page_size, a.check_every);
  if (check && a.check_inject_fault) check->inject_fault();

  ReportContext ctx;
  ctx.headline = fmt::format("{} on {}{}", model.describe(), to_string(device),
                             device.is_cpu() ? fmt::format(" ({} threads)", threads) : "");
  ctx.trace_line = trace_line(trace);
  ctx.num_pages = std::int32_t(num_pages);
  ctx.page_size = page_size;
  ctx.kv_cache_bytes = engine->kv_cache_bytes();
  ctx.config = {
      {"kvinfer", version()},
      {"model",
       {{"preset", a.preset},
        {"name", model.name},
        {"attention", mla ? "mla" : "gqa"},
        {"num_layers", model.num_layers},
        {"num_qo_heads", model.num_qo_heads},
        {"num_kv_heads", mla ? 1 : model.num_kv_heads},
        {"head_dim", mla ? model.head_dim_ckv + model.head_dim_kpe : model.head_dim},
        {"q_dtype", std::string(dtype_name(model.q_dtype))},
        {"kv_dtype", std::string(dtype_name(model.kv_dtype))}}},
      {"device", to_string(device)},
      {"threads", device.is_cpu() ? threads : 0},
      {"trace", {{"source", trace.source}, {"requests", trace.requests.size()}, {"summary", ctx.trace_line}}},
      {"scheduler",
       {{"page_size", page_size},
        {"num_pages", num_pages},
        {"max_batch", a.max_batch},
        {"max_prefill_tokens", a.max_prefill_tokens},
        {"cascade", !a.no_cascade},
        {"prefix_sharing", !a.no_prefix_sharing}}},
      {"seed", a.seed}};

  // ---- the run
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  RunMetrics metrics;
  Progress progress(!a.quiet, expected_tokens(trace, so), model.num_layers);
  if (progress.enabled()) engine->set_on_layer([&progress](int layer) { progress.layer_done(layer); });
  const auto status = [&] {
    return ProgressStatus{
        .step = metrics.steps,
        .running = scheduler.num_running(),
        .waiting = scheduler.num_waiting(),
        .finished = scheduler.num_finished(),
        .requests = scheduler.num_requests(),
        .pages_in_use = pool.in_use(),
        .num_pages = pool.num_pages(),
        .tokens_per_s = metrics.wall_s > 0
                            ? double(metrics.prompt_tokens + metrics.generated_tokens) / metrics.wall_s
                            : 0.0};
  };
  while (!scheduler.finished()) {
    const StepBatch batch = scheduler.next_step(elapsed());
    progress.begin_step(status(), batch.new_tokens());
    const double step_start = elapsed();
    const StepStats stats = engine->run_step(batch, check ? &*check : nullptr);
    const std::int32_t pages_in_step = pool.in_use();  // before the finished requests' pages return
    const double step_end = elapsed();
    metrics.add(batch, stats, pages_in_step, step_end - step_start, step_end);
    scheduler.complete_step(batch, elapsed());
    metrics.wall_s = elapsed();
    progress.end_step(status(), metrics.prompt_tokens + metrics.generated_tokens);
  }
  progress.finish();

  ctx.peak_pages = pool.peak_in_use();
  ctx.times = scheduler.times();
  if (check) {
    const CheckSummary& s = check->summary();
    ctx.check = {{"enabled", true},          {"passed", true},
                 {"every", a.check_every},   {"layer_steps", s.layer_steps},
                 {"segments", s.segments},   {"rows", s.rows},
                 {"max_err_o", s.max_err_o}, {"max_err_lse", s.max_err_lse},
                 {"atol", s.atol},           {"rtol", s.rtol}};
  } else {
    ctx.check = {{"enabled", false}};
  }
  const nlohmann::json report = make_report(metrics, ctx);
  print_report(report, ctx);
  if (json_target) {
    write_file_atomic(*json_target, report.dump(2) + "\n");
    fmt::print("report:    {}\n", a.json_path);
  }
  return kExitOk;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Simulate serving: continuous batching of a request trace over a paged KV cache, every layer's "
      "attention run for real on random keys and values");
  ServeArgs& a = *args;
  cmd->add_option("--preset", a.preset, "Model shape (--list shows them)")->capture_default_str();
  add_number(cmd, "--layers", a.model.num_layers, Bounds<int>{1, 1024}, "Override the preset's layer count");
  add_number(cmd, "--qo-heads", a.model.num_qo_heads, Bounds<int>{1, 1024},
             "Override the preset's query heads");
  add_number(cmd, "--kv-heads", a.model.num_kv_heads, Bounds<int>{1, 1024},
             "Override the preset's key/value heads");
  add_number(cmd, "--head-dim", a.model.head_dim, Bounds<int>{16, 512, false, "a multiple of 16"},
             "Override the preset's head dim");
  cmd->add_option("--dtype", a.model.q_dtype, "Query/output dtype: f16 or bf16 (default bf16)");
  cmd->add_option("--kv-dtype", a.model.kv_dtype, "KV cache dtype: f16, bf16, e4m3 or e5m2 (default bf16)");
  cmd->add_option("--device", a.device,
                  "cpu, cuda (= cuda:0), cuda:N or auto (CUDA when built and a GPU is found)")
      ->capture_default_str();
  add_number(cmd, "--threads", a.threads, thread_bounds(), "CPU threads");
  add_number(cmd, "--page-size", a.page_size, Bounds<int>{1, 1024}, "Tokens per page (default 16; MLA 64)");
  add_number(cmd, "--num-pages", a.num_pages,
             Bounds<std::int64_t>{0, std::int64_t(1) << 30, false, "0: automatic"},
             "Pages in the pool (default: enough for the trace within --kv-memory)");
  add_number(cmd, "--kv-memory", a.kv_memory_mib, Bounds<double>{0, double(1 << 24), true, "MiB"},
             "KV cache budget in MiB, all layers");
  cmd->add_option("--trace", a.trace, "Synthetic trace: mixed, chat or shared-prefix")->capture_default_str();
  cmd->add_option("--trace-file", a.trace_file,
                  "A JSON or CSV trace (see README) instead of a synthetic one");
  add_number(cmd, "--requests", a.synthetic.num_requests, Bounds<int>{1, 1'000'000},
             "Requests of the synthetic trace");
  cmd->add_option("--prompt-len", a.prompt_len, "Prompt tokens MIN:MAX (log-uniform), in [1, 1048576]")
      ->capture_default_str();
  cmd->add_option("--gen-len", a.gen_len, "Generated tokens MIN:MAX (uniform), in [1, 1048576]")
      ->capture_default_str();
  add_number(cmd, "--prefix-len", a.synthetic.prefix_len, Bounds<std::int32_t>{1, 1 << 20},
             "Tokens of each shared prefix");
  add_number(cmd, "--prefix-groups", a.synthetic.prefix_groups, Bounds<int>{1, 65536},
             "Shared-prefix groups");
  add_number(cmd, "--arrival-rate", a.synthetic.arrival_rate, Bounds<double>{0, 1e6, false, "0: all at once"},
             "Requests arriving per step (Poisson)");
  add_number(cmd, "--seed", a.seed, Bounds<std::uint64_t>{0, UINT64_MAX},
             "Seed of the trace, the page order and the random K/V");
  add_number(cmd, "--max-batch", a.max_batch, Bounds<int>{1, 65536}, "Requests running at once");
  add_number(cmd, "--max-prefill-tokens", a.max_prefill_tokens, Bounds<int>{1, 1 << 20},
             "Prefill query rows per step");
  cmd->add_flag("--no-cascade", a.no_cascade,
                "Decode shared-prefix groups with plain decode instead of cascade attention");
  cmd->add_flag("--no-prefix-sharing", a.no_prefix_sharing,
                "Every request stores and prefills its own prefix");
  cmd->add_flag("--check", a.check,
                "Compare sampled steps and layers with the float64 oracle; exit 1 on a mismatch");
  add_number(cmd, "--check-every", a.check_every, Bounds<std::int64_t>{1, 1'000'000'000},
             "With --check: every N-th step (one layer, rotating)");
  // Hidden: the CLI tests' proof that a mismatch fails the run.
  cmd->add_flag("--check-inject-fault", a.check_inject_fault, "")->group("");
  cmd->add_option(
      "--json", a.json_path,
      "Write the report as JSON to this file (a regular file or a new one; a symlink is followed), "
      "atomically");
  cmd->add_flag("--quiet,-q", a.quiet,
                "No progress bar (there is none either when stderr is not a terminal)");
  cmd->add_flag("--list", a.list, "List the model presets and synthetic traces");
  cmd->callback([args, &exit_code] {
    try {
      exit_code = run_serve(*args);
    } catch (const InputError& e) {
      fmt::print(stderr, "kvinfer serve: error: {}\n", e.what());
      exit_code = kExitBadInput;
    } catch (const CheckFailure& e) {
      fmt::print(stderr, "kvinfer serve: CHECK FAILED: {}\n", e.what());
      exit_code = kExitFailure;
    } catch (const Error& e) {
      // The library rejected a configuration (e.g. a shape without CUDA kernels).
      fmt::print(stderr, "kvinfer serve: error: {}\n", e.what());
      exit_code = kExitBadInput;
    } catch (const std::bad_alloc&) {
      fmt::print(
          stderr,
          "kvinfer serve: error: out of memory (lower --kv-memory, --max-prefill-tokens or --max-batch)\n");
      exit_code = kExitBadInput;
    } catch (const std::exception& e) {
      fmt::print(stderr, "kvinfer serve: failed: {}\n", e.what());
      exit_code = kExitFailure;
    }
  });
}

}  // namespace kvinfer::cli
