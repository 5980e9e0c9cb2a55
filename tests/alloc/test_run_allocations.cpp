// SPDX-License-Identifier: Apache-2.0
// run() allocates nothing on the CPU backend (SPEC §3, §5): the global operator new
// (every form) is replaced by one that counts while a run is being measured, and,
// outside AddressSanitizer (which owns malloc), so are malloc and its relatives.
// Every wrapper is measured on the first run after its plan and on a later one,
// with the thread pool at several threads, with and without split-KV merges, with
// the options that take other paths (custom mask, ALiBi, RoPE, soft cap, fp8 KV).
// This file is a binary of its own so that the replacement touches no other test.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>

#include "cpu/thread_pool.hpp"
#include "kvinfer/kvinfer.hpp"
#include "testing/random.hpp"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};

void count() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}

void* checked(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) {
  count();
  return checked(std::malloc(n == 0 ? 1 : n));
}
void* operator new[](std::size_t n) {
  count();
  return checked(std::malloc(n == 0 ? 1 : n));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  count();
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  count();
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new(std::size_t n, std::align_val_t a) {
  count();
  const auto al = std::size_t(a);
  return checked(std::aligned_alloc(al, (n + al - 1) / al * al));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  count();
  const auto al = std::size_t(a);
  return checked(std::aligned_alloc(al, (n + al - 1) / al * al));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

#if defined(__SANITIZE_ADDRESS__)
#define KVINFER_TEST_HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVINFER_TEST_HAVE_ASAN 1
#endif
#endif

#if !defined(KVINFER_TEST_HAVE_ASAN) && defined(__GLIBC__)
// glibc's own entry points, under which malloc is interposed here.
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_calloc(std::size_t, std::size_t);
extern "C" void* __libc_realloc(void*, std::size_t);
extern "C" void* __libc_memalign(std::size_t, std::size_t);
extern "C" {
void* malloc(std::size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  count();
  return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) {
  count();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  count();
  *out = __libc_memalign(align, n);
  return *out ? 0 : ENOMEM;
}
}
#define KVINFER_TEST_COUNTS_MALLOC 1
#endif

namespace kvinfer::testing {
namespace {

// Allocations made by call(), in every thread.
template <class F>
long allocations_in(F&& call) {
  g_allocations.store(0);
  g_counting.store(true);
  call();
  g_counting.store(false);
  return g_allocations.load();
}

// The first run after each plan, and a second one: both allocate nothing.
template <class Plan, class Run>
void expect_runs_allocate_nothing(const char* what, Plan&& plan, Run&& run) {
  plan();
  const long first = allocations_in(run);
  const long second = allocations_in(run);
  EXPECT_EQ(first, 0) << what << ": the first run() after plan() allocated";
  EXPECT_EQ(second, 0) << what << ": a later run() allocated";
  std::printf("[ allocs   ] %-58s first run %ld, next run %ld\n", what, first, second);
}

Tensor random_bytes_of(Shape shape, DType dtype, Rng& rng) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = t.data_as<std::uint8_t>();
  // Small finite values in every format: random low bits, a fixed small exponent.
  for (std::int64_t i = 0; i < std::int64_t(t.nbytes()); ++i) p[i] = std::uint8_t(rng() & 0x3F);
  return t;
}

constexpr std::int64_t kHq = 8, kHk = 2, kD = 64, kPage = 16;

struct AttentionSetup {
  Rng rng{7};
  std::vector<std::int32_t> qo{0, 1, 9, 40}, kv{0, 300, 317, 1000};
  std::vector<std::int32_t> kv_lens{300, 17, 683};
  HostPageTable table = random_page_table(kv_lens, kPage, 3, rng);
  Tensor qo_indptr = int32_tensor(qo), kv_indptr = int32_tensor(kv);
  Tensor q = random_bf16({40, kHq, kD}, rng), out = Tensor::empty({40, kHq, kD}, DType::kBF16);
  Tensor lse = Tensor::empty({40, kHq}, DType::kF32);
  Tensor k = random_bf16({1000, kHk, kD}, rng), v = random_bf16({1000, kHk, kD}, rng);
  Tensor cache = random_bf16({table.num_pages, 2, kPage, kHk, kD}, rng);
  Tensor mask = random_bools(1 * 300 + 8 * 17 + 31 * 683, rng);

  RaggedPrefillPlanArgs ragged(const AttentionOptions& options, const SplitOptions& split = {}) const {
    return {.qo_indptr = qo_indptr, .kv_indptr = kv_indptr, .num_qo_heads = kHq, .num_kv_heads = kHk,
            .head_dim_qk = kD, .options = options, .split = split};
  }
  PagedPrefillPlanArgs paged(const AttentionOptions& options, const SplitOptions& split) const {
    return {.qo_indptr = qo_indptr, .page_table = table.view(), .num_qo_heads = kHq, .num_kv_heads = kHk,
            .head_dim = kD, .page_size = kPage, .options = options, .split = split};
  }
  DecodePlanArgs decode(const AttentionOptions& options, const SplitOptions& split = {}) const {
    return {.page_table = table.view(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD,
            .page_size = kPage, .options = options, .split = split};
  }
};

struct Variant {
  const char* name;
  AttentionOptions options;
  SplitOptions split;
  DType kv_dtype = DType::kBF16;
};

std::vector<Variant> variants() {
  return {
      {"auto split", {}, {}},
      {"fixed split 64", {.mask_mode = MaskMode::kCausal}, {.fixed_split_size = 64}},
      {"no split", {.mask_mode = MaskMode::kCausal}, {.disable_split_kv = true}},
      {"ALiBi, soft cap, window", {.window_left = 100, .logits_soft_cap = 30.0f, .pos_encoding = PosEncoding::kAlibi},
       {.fixed_split_size = 128}},
      {"RoPE", {.mask_mode = MaskMode::kCausal, .pos_encoding = PosEncoding::kRopeLlama}, {}},
  };
}

// Each variant planned on a fresh wrapper W (args_of(variant)) and run (run(w)):
// expect_runs_allocate_nothing.
template <class W, class ArgsOf, class Run>
void expect_variants_allocate_nothing(const std::string& what, ArgsOf&& args_of, Run&& run) {
  for (const Variant& var : variants()) {
    W w;
    expect_runs_allocate_nothing((what + ", " + var.name).c_str(), [&] { w.plan(args_of(var)); }, [&] { run(w); });
  }
}

class RunAllocations : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { cpu::set_num_threads(GetParam()); }
  void TearDown() override { cpu::set_num_threads(0); }
};

TEST_P(RunAllocations, RaggedPrefill) {
  AttentionSetup s;
  expect_variants_allocate_nothing<BatchPrefillWithRaggedKVCache>(
      "ragged prefill", [&](const Variant& var) { return s.ragged(var.options, var.split); },
      [&](auto& w) { w.run(s.q, s.k, s.v, s.out, {.lse = s.lse}); });
  BatchPrefillWithRaggedKVCache w;
  expect_runs_allocate_nothing(
      "ragged prefill, custom mask",
      [&] {
        RaggedPrefillPlanArgs a = s.ragged({.mask_mode = MaskMode::kCustom});
        a.custom_mask = s.mask;
        w.plan(a);
      },
      [&] { w.run(s.q, s.k, s.v, s.out, {.lse = s.lse}); });
}

TEST_P(RunAllocations, PagedPrefillAndDecode) {
  AttentionSetup s;
  expect_variants_allocate_nothing<BatchPrefillWithPagedKVCache>(
      "paged prefill", [&](const Variant& var) { return s.paged(var.options, var.split); },
      [&](auto& w) { w.run(s.q, PagedKVCache::combined(s.cache), s.out, {.lse = s.lse}); });
  expect_variants_allocate_nothing<BatchDecodeWithPagedKVCache>(
      "decode",
      [&](const Variant& var) {
        AttentionOptions decode_options = var.options;
        decode_options.mask_mode = MaskMode::kNone;
        return s.decode(decode_options, var.split);
      },
      [&](auto& d) { d.run(s.q.view().slice(0, 0, 3), PagedKVCache::combined(s.cache), s.out.view().slice(0, 0, 3)); });
  // fp8 KV (direct widening of e4m3 rows) and a fixed capacity.
  Tensor cache8 = random_bytes_of({s.table.num_pages, 2, kPage, kHk, kD}, DType::kE4M3, s.rng);
  BatchDecodeWithPagedKVCache d(Device::cpu(), KVLayout::kNHD, Capacity{8, 8, 200});
  expect_runs_allocate_nothing(
      "decode, fp8 KV, fixed capacity",
      [&] {
        DecodePlanArgs a = s.decode({});
        a.kv_dtype = DType::kE4M3;
        d.plan(a);
      },
      [&] {
        d.run(s.q.view().slice(0, 0, 3), PagedKVCache::combined(cache8), s.out.view().slice(0, 0, 3), {.k_scale = 0.5f});
      });
}

TEST_P(RunAllocations, Cascade) {
  AttentionSetup s;
  Rng rng(9);
  // Three levels: a shared prefix of all rows, one per pair of requests, one per request.
  const std::vector<std::int32_t> prefix_lens{100}, pair_lens{40, 0}, own_lens{30, 5, 60};
  HostPageTable prefix = random_page_table(prefix_lens, kPage, 0, rng);
  HostPageTable pair = random_page_table(pair_lens, kPage, 0, rng);
  HostPageTable own = random_page_table(own_lens, kPage, 0, rng);
  const std::int64_t pages = std::max({prefix.num_pages, pair.num_pages, own.num_pages});
  Tensor cache = random_bf16({pages, 2, kPage, kHk, kD}, rng);
  Tensor qo0 = int32_tensor(std::vector<std::int32_t>{0, 40}), qo1 = int32_tensor(std::vector<std::int32_t>{0, 9, 40});
  for (const int num_levels : {2, 3}) {
    MultiLevelCascadeAttention w(num_levels);
    CascadePlanArgs args{.num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage,
                         .options = {.mask_mode = MaskMode::kCausal}};
    if (num_levels == 3) args.levels.push_back({.qo_indptr = qo0, .page_table = prefix.view()});
    args.levels.push_back({.qo_indptr = qo1, .page_table = pair.view()});
    args.levels.push_back({.qo_indptr = s.qo_indptr, .page_table = own.view()});
    expect_runs_allocate_nothing(num_levels == 2 ? "cascade, 2 levels" : "cascade, 3 levels",
                                 [&] { w.plan(args); },
                                 [&] { w.run(s.q, PagedKVCache::combined(cache), s.out, {.lse = s.lse}); });
    // Without an LSE out the cascade merges into its own.
    expect_runs_allocate_nothing("cascade, no lse", [&] { w.plan(args); },
                                 [&] { w.run(s.q, PagedKVCache::combined(cache), s.out); });
  }
}

TEST_P(RunAllocations, MLA) {
  Rng rng(11);
  constexpr std::int64_t kHeads = 16, kDc = kMlaHeadDimCkv, kDp = kMlaHeadDimKpe;
  const std::vector<std::int32_t> kv_lens{300, 1, 77};
  HostPageTable table = random_page_table(kv_lens, kPage, 2, rng);
  Tensor qo_indptr = int32_tensor(std::vector<std::int32_t>{0, 4, 5, 9});
  Tensor kv_len = int32_tensor(kv_lens);
  Tensor cache = random_bf16({table.num_pages, kPage, kDc + kDp}, rng);
  Tensor q_nope = random_bf16({9, kHeads, kDc}, rng), q_pe = random_bf16({9, kHeads, kDp}, rng);
  Tensor out = Tensor::empty({9, kHeads, kDc}, DType::kBF16), lse = Tensor::empty({9, kHeads}, DType::kF32);
  for (const SplitOptions split : {SplitOptions{}, SplitOptions{.fixed_split_size = 32}, SplitOptions{.disable_split_kv = true}}) {
    for (const bool causal : {false, true}) {
      BatchMLAPagedAttention w;
      expect_runs_allocate_nothing(
          causal ? "MLA, causal" : "MLA",
          [&] {
            w.plan({.qo_indptr = qo_indptr, .kv_indptr = table.indptr, .kv_indices = table.indices, .kv_len = kv_len,
                    .num_heads = kHeads, .page_size = kPage, .causal = causal, .sm_scale = 0.07f, .split = split});
          },
          [&] { w.run(q_nope, q_pe, MLACache::combined(cache), out, {.lse = lse}); });
    }
  }
  // Without the rotary part (kpe absent: no q_pe rows at all).
  Tensor cache_nope = random_bf16({table.num_pages, kPage, kDc}, rng);
  BatchMLAPagedAttention w;
  expect_runs_allocate_nothing(
      "MLA, head_dim_kpe 0",
      [&] {
        w.plan({.qo_indptr = qo_indptr, .kv_indptr = table.indptr, .kv_indices = table.indices, .kv_len = kv_len,
                .num_heads = kHeads, .head_dim_kpe = 0, .page_size = kPage, .sm_scale = 0.07f});
      },
      [&] { w.run(q_nope, {}, MLACache::combined(cache_nope), out); });
}

// 1 thread: the caller alone; 3: the pool, more threads than this machine may have.
INSTANTIATE_TEST_SUITE_P(Threads, RunAllocations, ::testing::Values(1, 3),
                         [](const auto& info) { return std::to_string(info.param) + "_threads"; });

// The counter counts: a run that does allocate is seen (the test is not vacuous).
TEST(RunAllocationsCounter, SeesAllocations) {
  const long n = allocations_in([] {
    std::vector<int> v(100);
    v[3] = 1;
    ASSERT_EQ(v[3], 1);
  });
  EXPECT_GE(n, 1);
#ifdef KVINFER_TEST_COUNTS_MALLOC
  void* p = nullptr;
  const long m = allocations_in([&] { p = std::malloc(64); });
  std::free(p);
  EXPECT_EQ(m, 1);
#endif
}

}  // namespace
}  // namespace kvinfer::testing
