// SPDX-License-Identifier: Apache-2.0
// plan() is atomic: a plan() that throws on its arguments leaves the previous plan
// in place, so that the next run() gives that plan's result bit for bit; one that
// fails while writing its buffers (out of memory) leaves no plan, and run() throws.
// Every wrapper, and a cascade whose re-plan fails at any level.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"
#include "testing/sanitized.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kHq = 4, kHk = 2, kD = 64, kPage = 16;

std::vector<std::uint8_t> bytes_of(const TensorView& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.data());
  return {p, p + t.numel() * std::int64_t(t.element_size())};
}

// Two plans' worth of ragged inputs: plan A (custom mask) and B (other lengths).
struct Ragged {
  Rng rng{1};
  Tensor qo_a = int32_tensor(std::vector<std::int32_t>{0, 3, 8}), kv_a = int32_tensor(std::vector<std::int32_t>{0, 40, 70});
  Tensor qo_b = int32_tensor(std::vector<std::int32_t>{0, 8}), kv_b = int32_tensor(std::vector<std::int32_t>{0, 70});
  Tensor mask_a = random_bools(3 * 40 + 5 * 30, rng);
  Tensor q = random_bf16({8, kHq, kD}, rng), k = random_bf16({70, kHk, kD}, rng), v = random_bf16({70, kHk, kD}, rng);
  RaggedPrefillPlanArgs a() const {
    return {.qo_indptr = qo_a, .kv_indptr = kv_a, .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim_qk = kD,
            .options = {.mask_mode = MaskMode::kCustom}, .custom_mask = mask_a, .split = {.fixed_split_size = 16}};
  }
  std::vector<std::uint8_t> run(const BatchPrefillWithRaggedKVCache& w) const {
    Tensor out = Tensor::zeros({8, kHq, kD}, DType::kBF16), lse = Tensor::zeros({8, kHq}, DType::kF32);
    w.run(q, k, v, out, {.lse = lse});
    std::vector<std::uint8_t> r = bytes_of(out), l = bytes_of(lse);
    r.insert(r.end(), l.begin(), l.end());
    return r;
  }
};

TEST(PlanAtomicity, RaggedPrefillKeepsThePlanOnABadReplan) {
  Ragged s;
  BatchPrefillWithRaggedKVCache w;
  w.plan(s.a());
  const std::vector<std::uint8_t> before = s.run(w);
  // Each of these is rejected after some of the plan's work was done.
  Tensor short_mask = random_bools(3 * 40 + 5 * 30 - 1, s.rng);
  RaggedPrefillPlanArgs bad = s.a();
  bad.qo_indptr = s.qo_b;
  bad.kv_indptr = s.kv_b;
  bad.custom_mask = short_mask;  // wrong length for B's lengths: found after B's lengths were read
  expect_error([&] { w.plan(bad); }, "custom_mask.shape[0]");
  EXPECT_EQ(s.run(w), before);
  bad = s.a();
  bad.options.alibi_slopes = {1.0f};
  bad.options.pos_encoding = PosEncoding::kAlibi;
  expect_error([&] { w.plan(bad); }, "options.alibi_slopes.size()");
  EXPECT_EQ(s.run(w), before);
  bad = s.a();
  bad.split.fixed_split_size = 1;
  bad.options.mask_mode = MaskMode::kCausal;
  bad.custom_mask = {};
  Tensor huge_kv = int32_tensor(std::vector<std::int32_t>{0, 40, std::numeric_limits<std::int32_t>::max()});
  bad.kv_indptr = huge_kv;
  expect_error([&] { w.plan(bad); }, "work items");  // found while making the schedule
  EXPECT_EQ(s.run(w), before);
  // Caller buffers that hold A, and a B that needs a larger int buffer: found
  // before anything is written.
  Tensor a_float = Tensor::zeros({1 << 20}, DType::kU8);
  Tensor a_int = Tensor::zeros({std::int64_t(w.workspace_size(s.a()).int_bytes)}, DType::kU8);
  w.reset_workspace_buffer(a_float, a_int);
  EXPECT_EQ(s.run(w), before);
  Tensor kv_long = int32_tensor(std::vector<std::int32_t>{0, 700});
  RaggedPrefillPlanArgs b = s.a();
  b.qo_indptr = s.qo_b;
  b.kv_indptr = kv_long;
  b.options.mask_mode = MaskMode::kCausal;
  b.custom_mask = {};
  ASSERT_GT(w.workspace_size(b).int_bytes, a_int.nbytes());
  expect_error([&] { w.plan(b); }, "int_workspace_buffer");
  EXPECT_EQ(s.run(w), before);
}

TEST(PlanAtomicity, PagedWrappersKeepThePlanOnABadReplan) {
  Rng rng(2);
  const std::vector<std::int32_t> lens_a{40, 7}, lens_b{100};
  HostPageTable ta = random_page_table(lens_a, kPage, 2, rng), tb = random_page_table(lens_b, kPage, 0, rng);
  Tensor cache = random_bf16({std::max(ta.num_pages, tb.num_pages), 2, kPage, kHk, kD}, rng);
  Tensor q = random_bf16({2, kHq, kD}, rng);
  const auto run = [&](const BatchDecodeWithPagedKVCache& w) {
    Tensor out = Tensor::zeros({2, kHq, kD}, DType::kBF16);
    w.run(q, PagedKVCache::combined(cache), out);
    return bytes_of(out);
  };
  BatchDecodeWithPagedKVCache w;
  w.plan({.page_table = ta.view(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage});
  const std::vector<std::uint8_t> before = run(w);
  Tensor bad_last = int32_tensor(std::vector<std::int32_t>{17});
  expect_error([&] {
    w.plan({.page_table = {tb.indptr, tb.indices, bad_last}, .num_qo_heads = kHq, .num_kv_heads = kHk,
            .head_dim = kD, .page_size = kPage});
  }, "kv_last_page_len[0]");
  EXPECT_EQ(run(w), before);
  expect_error([&] {
    w.plan({.page_table = tb.view(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage,
            .options = {.window_left = 3, .pos_encoding = PosEncoding(42)}});
  }, "options.pos_encoding");
  EXPECT_EQ(run(w), before);

  Tensor qo = int32_tensor(std::vector<std::int32_t>{0, 1, 2});
  BatchPrefillWithPagedKVCache p;
  p.plan({.qo_indptr = qo, .page_table = ta.view(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD,
          .page_size = kPage, .options = {.mask_mode = MaskMode::kCausal}});
  Tensor out_a = Tensor::zeros({2, kHq, kD}, DType::kBF16);
  p.run(q, PagedKVCache::combined(cache), out_a);
  Tensor qo_b = int32_tensor(std::vector<std::int32_t>{0, 2});
  expect_error([&] {
    p.plan({.qo_indptr = qo_b, .page_table = tb.view(), .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD,
            .page_size = kPage, .options = {.mask_mode = MaskMode::kCustom}, .custom_mask = random_bools(7, rng)});
  }, "custom_mask.shape[0]");
  Tensor out = Tensor::zeros({2, kHq, kD}, DType::kBF16);
  p.run(q, PagedKVCache::combined(cache), out);
  EXPECT_EQ(bytes_of(out), bytes_of(out_a));
}

TEST(PlanAtomicity, MLAKeepsThePlanOnABadReplan) {
  Rng rng(3);
  constexpr std::int64_t kHeads = 16;
  const std::vector<std::int32_t> lens{90, 3};
  HostPageTable t = random_page_table(lens, kPage, 1, rng);
  Tensor qo = int32_tensor(std::vector<std::int32_t>{0, 2, 3}), kv_len = int32_tensor(lens);
  Tensor cache = random_bf16({t.num_pages, kPage, kMlaHeadDimCkv + kMlaHeadDimKpe}, rng);
  Tensor qn = random_bf16({3, kHeads, kMlaHeadDimCkv}, rng), qp = random_bf16({3, kHeads, kMlaHeadDimKpe}, rng);
  const auto run = [&](const BatchMLAPagedAttention& w) {
    Tensor out = Tensor::zeros({3, kHeads, kMlaHeadDimCkv}, DType::kBF16);
    w.run(qn, qp, MLACache::combined(cache), out);
    return bytes_of(out);
  };
  const MLAPlanArgs good{.qo_indptr = qo, .kv_indptr = t.indptr, .kv_indices = t.indices, .kv_len = kv_len,
                         .num_heads = kHeads, .page_size = kPage, .causal = true, .sm_scale = 0.07f,
                         .split = {.fixed_split_size = 32}};
  BatchMLAPagedAttention w;
  w.plan(good);
  const std::vector<std::uint8_t> before = run(w);
  MLAPlanArgs bad = good;
  Tensor bad_len = int32_tensor(std::vector<std::int32_t>{90, 300});
  bad.kv_len = bad_len;
  expect_error([&] { w.plan(bad); }, "kv_len[1]");
  EXPECT_EQ(run(w), before);
  bad = good;
  bad.num_heads = std::int64_t(1) << 40;
  expect_error([&] { w.plan(bad); }, "num_heads");
  EXPECT_EQ(run(w), before);
}

// A cascade re-plan failing at level 1 (or 0) keeps the whole previous plan: level
// 0 is not left re-planned beside the old level 1.
TEST(PlanAtomicity, CascadeKeepsEveryLevelOnABadReplan) {
  Rng rng(4);
  const std::vector<std::int32_t> shared{50}, own_a{20, 3}, own_b{9, 33};
  HostPageTable s0 = random_page_table(shared, kPage, 0, rng), s1 = random_page_table(std::vector<std::int32_t>{77}, kPage, 0, rng);
  HostPageTable oa = random_page_table(own_a, kPage, 0, rng), ob = random_page_table(own_b, kPage, 0, rng);
  const std::int64_t pages = std::max({s0.num_pages, s1.num_pages, oa.num_pages, ob.num_pages});
  Tensor cache = random_bf16({pages, 2, kPage, kHk, kD}, rng);
  Tensor q = random_bf16({2, kHq, kD}, rng);
  Tensor qo0 = int32_tensor(std::vector<std::int32_t>{0, 2}), qo1 = int32_tensor(std::vector<std::int32_t>{0, 1, 2});
  const auto args = [&](const HostPageTable& l0, PageTable l1) {
    return CascadePlanArgs{.levels = {{.qo_indptr = qo0, .page_table = l0.view()}, {.qo_indptr = qo1, .page_table = l1}},
                           .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage,
                           .options = {.mask_mode = MaskMode::kCausal}};
  };
  const auto run = [&](const MultiLevelCascadeAttention& w) {
    Tensor out = Tensor::zeros({2, kHq, kD}, DType::kBF16), lse = Tensor::zeros({2, kHq}, DType::kF32);
    w.run(q, PagedKVCache::combined(cache), out, {.lse = lse});
    std::vector<std::uint8_t> r = bytes_of(out), l = bytes_of(lse);
    r.insert(r.end(), l.begin(), l.end());
    return r;
  };
  for (const bool caller_buffers : {false, true}) {
    SCOPED_TRACE(caller_buffers);
    MultiLevelCascadeAttention w(2);
    Tensor fbuf = Tensor::zeros({1 << 20}, DType::kU8), ibuf = Tensor::zeros({1 << 16}, DType::kU8);
    if (caller_buffers) w.reset_workspace_buffer(fbuf, ibuf);
    w.plan(args(s0, oa.view()));
    const std::vector<std::uint8_t> before = run(w);
    // Level 0 new and valid (another shared prefix), level 1 invalid.
    Tensor bad_last = int32_tensor(std::vector<std::int32_t>{9, 0});
    expect_error([&] { w.plan(args(s1, {ob.indptr, ob.indices, bad_last})); }, "kv_last_page_len[1]");
    EXPECT_EQ(run(w), before);
    // Level 0 invalid, level 1 new and valid.
    Tensor bad_indptr = int32_tensor(std::vector<std::int32_t>{0, -1});
    expect_error([&] { w.plan(args(HostPageTable{bad_indptr, s1.indices, s1.last_page_len}, ob.view())); },
                 "kv_indptr[1]");
    EXPECT_EQ(run(w), before);
    // A good re-plan still takes effect.
    w.plan(args(s1, ob.view()));
    EXPECT_NE(run(w), before);
  }
}

#ifndef KVINFER_TEST_SANITIZED
// The child of AFailedCommitLeavesNoPlan; its exit code says what happened.
[[noreturn]] void plan_then_fail_to_commit() {
  Ragged s;
  BatchPrefillWithRaggedKVCache w;
  w.plan(s.a());
  s.run(w);
  // B: one long request split into many chunks, gigabytes of partial states.
  const std::int32_t kv = 1 << 20;
  Tensor qo_b = int32_tensor(std::vector<std::int32_t>{0, 64}), kv_b = int32_tensor(std::vector<std::int32_t>{0, kv});
  const RaggedPrefillPlanArgs b{.qo_indptr = qo_b, .kv_indptr = kv_b, .num_qo_heads = 64, .num_kv_heads = 64,
                                .head_dim_qk = 128, .split = {.fixed_split_size = 256}};
  if (w.workspace_size(b).float_bytes < (std::size_t(1) << 30)) std::_Exit(3);
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f == nullptr || std::fscanf(f, "%lu", &pages) != 1) std::_Exit(4);
  std::fclose(f);
  rlimit r{};
  r.rlim_cur = r.rlim_max = rlim_t(pages) * 4096 + (rlim_t(512) << 20);
  if (::setrlimit(RLIMIT_AS, &r) != 0) std::_Exit(5);
  try {
    w.plan(b);
    std::_Exit(6);
  } catch (const Error&) {
  }
  try {
    s.run(w);
    std::_Exit(7);
  } catch (const Error& e) {
    std::_Exit(e.argument() == "plan" ? 0 : 8);
  }
}
#endif

// A plan that fails while writing its buffers (here: the float workspace cannot be
// allocated) drops the plan: run() throws rather than run a half-written one.
TEST(PlanAtomicity, AFailedCommitLeavesNoPlan) {
#ifdef KVINFER_TEST_SANITIZED
  GTEST_SKIP() << "sanitizers reserve address space that an RLIMIT_AS would break";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(plan_then_fail_to_commit(), ::testing::ExitedWithCode(0), "");
#endif
}

}  // namespace
}  // namespace kvinfer::testing
