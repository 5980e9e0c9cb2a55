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
#include <cstdlib>
#include <new>
#include <optional>
#include <thread>

#include "commands.hpp"
#include "engine.hpp"
#include "input_error.hpp"
#include "kvinfer/kvinfer.hpp"
#include "model_preset.hpp"
#include "oracle_check.hpp"
#include "page_allocator.hpp"
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

std::pair<std::int32_t, std::int32_t> parse_range(const std::string& flag, const std::string& text) {
  const auto colon = text.find(':');
  auto parse = [&](std::string_view s) {
    std::int32_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
      throw InputError(fmt::format("{} = {}: must be N or MIN:MAX (integers)", flag, text));
    }
    return v;
  };
  if (colon == std::string::npos) {
    const std::int32_t v = parse(text);
    return {v, v};
  }
  return {parse(std::string_view(text).substr(0, colon)), parse(std::string_view(text).substr(colon + 1))};
}

// Why the CUDA backend cannot serve `model` (empty when it can): a one-request
// prefill and decode of the model's shape is attempted on the GPU, so the answer
// follows the kernels actually compiled in rather than a list kept here.
std::string cuda_cannot_serve(const ModelShape& model) {
  const Device gpu = Device::cuda(0);
  try {
    if (model.kind == AttentionKind::kMla) {
      const std::int64_t h = model.num_qo_heads, dc = model.head_dim_ckv, dp = model.head_dim_kpe;
      std::int32_t qo[] = {0, 2}, kvp[] = {0, 1}, lens[] = {2};
      const Tensor ids = Tensor::zeros({1}, DType::kI32, gpu);
      BatchMLAPagedAttention w(gpu);
      w.plan({.qo_indptr = TensorView(qo, DType::kI32, {2}), .kv_indptr = TensorView(kvp, DType::kI32, {2}),
              .kv_indices = ids, .kv_len = TensorView(lens, DType::kI32, {1}), .num_heads = h, .head_dim_ckv = dc,
              .head_dim_kpe = dp, .page_size = 16, .sm_scale = model.sm_scale(), .q_dtype = model.q_dtype,
              .kv_dtype = model.kv_dtype});
      const Tensor q_nope = Tensor::zeros({2, h, dc}, model.q_dtype, gpu), out = Tensor::zeros({2, h, dc}, model.q_dtype, gpu);
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
    prefill.plan({.qo_indptr = TensorView(qo, DType::kI32, {2}), .page_table = table,
                  .num_qo_heads = model.num_qo_heads, .num_kv_heads = model.num_kv_heads, .head_dim = model.head_dim,
                  .page_size = 16, .options = {.mask_mode = MaskMode::kCausal}, .q_dtype = model.q_dtype,
                  .kv_dtype = model.kv_dtype, .o_dtype = model.q_dtype});
    BatchDecodeWithPagedKVCache decode(gpu);
    decode.plan({.page_table = table, .num_qo_heads = model.num_qo_heads, .num_kv_heads = model.num_kv_heads,
                 .head_dim = model.head_dim, .page_size = 16, .q_dtype = model.q_dtype, .kv_dtype = model.kv_dtype,
                 .o_dtype = model.q_dtype});
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

// auto: the GPU when the CUDA backend is built, a GPU is found and its kernels
// serve the model; otherwise the CPU, saying why.
Device resolve_device(const std::string& name, const ModelShape& model) {
  if (name == "cpu") return Device::cpu();
  if (name == "auto") {
    if (default_device().is_cpu()) return Device::cpu();
    const std::string why = cuda_cannot_serve(model);
    if (why.empty()) return Device::cuda(0);
    fmt::print(stderr, "kvinfer serve: --device auto runs on the CPU: {}\n", why);
    return Device::cpu();
  }
  if (name == "cuda") {
    if (!cuda_backend_built()) {
      throw InputError("--device = cuda: this build has no CUDA backend (configure with -DKVINFER_CUDA=ON)");
    }
    if (cuda_device_count() == 0) throw InputError("--device = cuda: no GPU found");
    return Device::cuda(0);
  }
  throw InputError(fmt::format("--device = {}: must be cpu, cuda or auto", name));
}

void print_catalogue() {
  fmt::print("model presets (--preset):\n");
  for (const ModelPresetInfo& p : model_presets()) fmt::print("  {:<12} {}\n", p.name, p.summary);
  fmt::print("synthetic traces (--trace):\n");
  for (const TraceInfo& t : synthetic_traces()) fmt::print("  {:<14} {}\n", t.name, t.summary);
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
  // ---- configuration (every check before anything is allocated or run)
  if (a.threads < 0) throw InputError(fmt::format("--threads = {}: must be >= 1 (0: all cores)", a.threads));
  if (a.threads > 0) ::setenv("KVINFER_NUM_THREADS", std::to_string(a.threads).c_str(), 1);
  const ModelShape model = make_model(a.preset, a.model);
  const Device device = resolve_device(a.device, model);
  const bool mla = model.kind == AttentionKind::kMla;
  const std::int32_t page_size = a.page_size.value_or(mla ? 64 : 16);
  if (page_size < 1 || page_size > 1024)
    throw InputError(fmt::format("--page-size = {}: must be in [1, 1024]", page_size));
  if (a.max_batch < 1) throw InputError(fmt::format("--max-batch = {}: must be at least 1", a.max_batch));
  if (a.max_prefill_tokens < 1) {
    throw InputError(fmt::format("--max-prefill-tokens = {}: must be at least 1", a.max_prefill_tokens));
  }
  if (a.check_every < 1)
    throw InputError(fmt::format("--check-every = {}: must be at least 1", a.check_every));
  if (!(a.kv_memory_mib > 0))
    throw InputError(fmt::format("--kv-memory = {}: must be positive (MiB)", a.kv_memory_mib));
  if (!a.json_path.empty()) check_writable(a.json_path);

  Trace trace;
  if (!a.trace_file.empty()) {
    trace = load_trace_file(a.trace_file);
  } else {
    SyntheticTraceOptions o = a.synthetic;
    o.name = a.trace;
    o.seed = a.seed;
    std::tie(o.prompt_min, o.prompt_max) = parse_range("--prompt-len", a.prompt_len);
    std::tie(o.gen_min, o.gen_max) = parse_range("--gen-len", a.gen_len);
    trace = make_synthetic_trace(o);
  }

  // ---- page pool: as given, or enough to hold the whole trace at once within --kv-memory
  const std::int64_t page_bytes =
      std::int64_t(page_size) * model.kv_bytes_per_token_layer() * model.num_layers;
  const auto budget_pages = std::int64_t(a.kv_memory_mib * double(1 << 20) / double(page_bytes));
  SchedulerOptions so{.page_size = page_size,
                      .max_batch = a.max_batch,
                      .max_prefill_tokens = a.max_prefill_tokens,
                      .share_prefixes = !a.no_prefix_sharing};
  std::int64_t num_pages = a.num_pages;
  if (num_pages < 0)
    throw InputError(fmt::format("--num-pages = {}: must be positive (0: automatic)", num_pages));
  if (num_pages == 0) {
    std::int64_t all = 0;
    for (const TraceRequest& r : trace.requests) all += pages_needed(r, so);
    num_pages = std::max<std::int64_t>(1, std::min(all, budget_pages));
  } else if (num_pages > budget_pages) {
    throw InputError(fmt::format("--num-pages = {}: {:.1f} MiB of KV cache, more than --kv-memory ({} MiB)",
                                 num_pages, double(num_pages * page_bytes) / double(1 << 20),
                                 a.kv_memory_mib));
  }
  if (num_pages > std::int64_t(1) << 30)
    throw InputError(fmt::format("--num-pages = {}: at most 2^30", num_pages));

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

  const char* env_threads = std::getenv("KVINFER_NUM_THREADS");
  const int threads = env_threads && std::atoi(env_threads) > 0
                          ? std::atoi(env_threads)
                          : int(std::max(1u, std::thread::hardware_concurrency()));
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
  Progress progress(!a.quiet);
  try {
    while (!scheduler.finished()) {
      const StepBatch batch = scheduler.next_step(elapsed());
      const StepStats stats = engine->run_step(batch, check ? &*check : nullptr);
      metrics.add(batch, stats);
      scheduler.complete_step(batch, elapsed());
      metrics.wall_s = elapsed();
      progress.update(scheduler, metrics, pool.in_use(), pool.num_pages());
    }
  } catch (...) {
    progress.finish();
    throw;
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
  if (!a.json_path.empty()) {
    write_json_atomic(a.json_path, report);
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
  cmd->add_option("--layers", a.model.num_layers, "Override the preset's layer count");
  cmd->add_option("--qo-heads", a.model.num_qo_heads, "Override the preset's query heads");
  cmd->add_option("--kv-heads", a.model.num_kv_heads, "Override the preset's key/value heads");
  cmd->add_option("--head-dim", a.model.head_dim, "Override the preset's head dim");
  cmd->add_option("--dtype", a.model.q_dtype, "Query/output dtype: f16 or bf16 (default bf16)");
  cmd->add_option("--kv-dtype", a.model.kv_dtype, "KV cache dtype: f16, bf16, e4m3 or e5m2 (default bf16)");
  cmd->add_option("--device", a.device, "cpu, cuda or auto (CUDA when built and a GPU is found)")
      ->capture_default_str();
  cmd->add_option("--threads", a.threads, "CPU threads (default: all cores)");
  cmd->add_option("--page-size", a.page_size, "Tokens per page (default 16; MLA 64)");
  cmd->add_option("--num-pages", a.num_pages,
                  "Pages in the pool (default: enough for the trace within --kv-memory)");
  cmd->add_option("--kv-memory", a.kv_memory_mib, "KV cache budget in MiB, all layers")
      ->capture_default_str();
  cmd->add_option("--trace", a.trace, "Synthetic trace: mixed, chat or shared-prefix")->capture_default_str();
  cmd->add_option("--trace-file", a.trace_file,
                  "A JSON or CSV trace (see README) instead of a synthetic one");
  cmd->add_option("--requests", a.synthetic.num_requests, "Requests of the synthetic trace")
      ->capture_default_str();
  cmd->add_option("--prompt-len", a.prompt_len, "Prompt tokens MIN:MAX (log-uniform)")->capture_default_str();
  cmd->add_option("--gen-len", a.gen_len, "Generated tokens MIN:MAX (uniform)")->capture_default_str();
  cmd->add_option("--prefix-len", a.synthetic.prefix_len, "Tokens of each shared prefix")
      ->capture_default_str();
  cmd->add_option("--prefix-groups", a.synthetic.prefix_groups, "Shared-prefix groups")
      ->capture_default_str();
  cmd->add_option("--arrival-rate", a.synthetic.arrival_rate,
                  "Requests arriving per step (Poisson; 0: all at once)")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "Seed of the trace, the page order and the random K/V")
      ->capture_default_str();
  cmd->add_option("--max-batch", a.max_batch, "Requests running at once")->capture_default_str();
  cmd->add_option("--max-prefill-tokens", a.max_prefill_tokens, "Prefill query rows per step")
      ->capture_default_str();
  cmd->add_flag("--no-cascade", a.no_cascade,
                "Decode shared-prefix groups with plain decode instead of cascade attention");
  cmd->add_flag("--no-prefix-sharing", a.no_prefix_sharing,
                "Every request stores and prefills its own prefix");
  cmd->add_flag("--check", a.check,
                "Compare sampled steps and layers with the float64 oracle; exit 1 on a mismatch");
  cmd->add_option("--check-every", a.check_every, "With --check: every N-th step (one layer, rotating)")
      ->capture_default_str();
  // Hidden: the CLI tests' proof that a mismatch fails the run.
  cmd->add_flag("--check-inject-fault", a.check_inject_fault, "")->group("");
  cmd->add_option("--json", a.json_path, "Write the report as JSON to this file");
  cmd->add_flag("--quiet,-q", a.quiet, "No progress line");
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
