// SPDX-License-Identifier: Apache-2.0
// BatchMLAPagedAttention on the CPU: the pairwise case list against the float64
// oracle, a cache filled by append_paged_mla_kv_cache attended end to end,
// determinism of split-KV, fixed capacity, and every rejected input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "cpu/thread_pool.hpp"
#include "testing/case_test.hpp"
#include "testing/expect_error.hpp"
#include "testing/mla_batch_invariance.hpp"
#include "testing/mla_case.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kDc = kMlaHeadDimCkv, kDp = kMlaHeadDimKpe;

using CpuMLACase = CaseTest<MLACase>;

TEST_P(CpuMLACase, MatchesOracle) { expect_matches_oracle(Device::cpu()); }

INSTANTIATE_TEST_SUITE_P(Cases, CpuMLACase, ::testing::ValuesIn(mla_case_list()), CaseName());

// A bf16 host tensor of unit normals.
Tensor normal_bf16(Shape shape, Rng& rng) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto* p = t.data_as<std::uint16_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = f32_to_bf16(nd(rng));
  return t;
}

std::vector<double> bf16_values(const TensorView& t) {  // contiguous [.., D] -> doubles
  std::vector<double> v(std::size_t(t.numel()));
  const auto* p = t.data_as<const std::uint16_t>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(p[i]);
  return v;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// ---------------------------------------------------------------- determinism
TEST(CpuMLA, FixedSplitIsThreadCountInvariant) {
  MLACase c;
  c.name = "threads";
  c.qo_lens = {3, 5, 1};
  c.kv_lens = {300, 97, 650};
  c.causal = true;
  c.split.fixed_split_size = 64;
  cpu::set_num_threads(1);
  const CaseOutput one = run_mla_case_raw(c, Device::cpu());
  cpu::set_num_threads(3);
  const CaseOutput three = run_mla_case_raw(c, Device::cpu());
  cpu::set_num_threads(0);
  EXPECT_TRUE(bitwise_equal(one.o, three.o));
  EXPECT_TRUE(bitwise_equal(one.lse, three.lse));
}

// With a fixed split size a request's output does not depend on its neighbours.
TEST(CpuMLA, FixedSplitIsBatchCompositionInvariant) {
  expect_mla_batch_invariance(
      {.qo_lens = {4, 3, 2}, .kv_lens = {50, 200, 33}, .causal = true, .fixed_split_size = 32, .alone = 1},
      Device::cpu());
}

// ---------------------------------------------------------------- append, then attend
// Tokens are appended in two steps (a prefill, then a few more per request) into a
// fresh cache with a shuffled page table; after each step the attention over the
// cache equals the oracle over the appended tokens.
TEST(CpuMLA, AppendThenAttendMatchesOracle) {
  Rng rng(21);
  const std::int64_t H = 8, page = 16, width = kDc + kDp;
  const float sm_scale = 1.0f / std::sqrt(192.0f);
  const std::vector<std::int32_t> final_lens{40, 1, 70}, prefix_lens{25, 0, 64};
  const auto batch = std::int64_t(final_lens.size());
  const HostPageTable full = random_page_table(final_lens, page, 4, rng);
  const std::vector<std::int32_t> full_indptr = to_vector_i32(full.indptr),
                                  full_ids = to_vector_i32(full.indices);
  Tensor cache = Tensor::empty({full.num_pages, page, width}, DType::kBF16);
  fill_bytes(cache, 0xFF);  // never-written slots are NaN
  const MLACache mla = MLACache::combined(cache);
  // The tokens of each request, [final_len, 576] in bf16.
  std::vector<Tensor> tokens;
  for (std::int32_t len : final_lens) tokens.push_back(normal_bf16({len, width}, rng));

  std::vector<std::int32_t> before(std::size_t(batch), 0);
  for (const std::vector<std::int32_t>* step : {&prefix_lens, &final_lens}) {
    const std::vector<std::int32_t>& lens = *step;
    // The page table of `lens`: each request's first pages of the full table.
    std::vector<std::int32_t> indptr{0}, ids, last, append_indptr{0}, qo_indptr{0};
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int32_t pages = std::int32_t((lens[b] + page - 1) / page);
      ids.insert(ids.end(), full_ids.begin() + full_indptr[b], full_ids.begin() + full_indptr[b] + pages);
      indptr.push_back(std::int32_t(ids.size()));
      last.push_back(pages == 0 ? 0 : std::int32_t(lens[b] - (pages - 1) * page));
      append_indptr.push_back(append_indptr.back() + lens[b] - before[b]);
      qo_indptr.push_back(append_indptr.back());  // the appended tokens are the queries
    }
    const std::int32_t nnz = append_indptr.back();
    const Tensor t_indptr = int32_tensor(indptr), t_ids = int32_tensor(ids), t_last = int32_tensor(last);
    const Tensor t_append_indptr = int32_tensor(append_indptr), t_lens = int32_tensor(lens);
    Tensor batch_indices = Tensor::empty({nnz}, DType::kI32), positions = Tensor::empty({nnz}, DType::kI32);
    get_batch_indices_positions(t_append_indptr, t_lens, batch_indices, positions);
    // Inputs: rows of one [nnz, 576 + 8] tensor, viewed as ckv and kpe (strided).
    Tensor input = Tensor::empty({nnz, width + 8}, DType::kBF16);
    for (std::int32_t t = 0; t < nnz; ++t) {
      const std::int32_t b = batch_indices.data_as<std::int32_t>()[t],
                         p = positions.data_as<std::int32_t>()[t];
      std::memcpy(static_cast<std::uint16_t*>(input.data()) + t * (width + 8),
                  tokens[std::size_t(b)].data_as<std::uint16_t>() + p * width, width * sizeof(std::uint16_t));
    }
    append_paged_mla_kv_cache(input.view().slice(1, 0, kDc), input.view().slice(1, kDc, width), batch_indices,
                              positions, mla, {t_indptr, t_ids, t_last});

    const Tensor q_nope = normal_bf16({nnz, H, kDc}, rng), q_pe = normal_bf16({nnz, H, kDp}, rng);
    Tensor out = Tensor::empty({nnz, H, kDc}, DType::kBF16), lse = Tensor::empty({nnz, H}, DType::kF32);
    fill_bytes(out, 0xFF);
    fill_bytes(lse, 0xFF);
    BatchMLAPagedAttention w;
    const Tensor t_qo = int32_tensor(qo_indptr);
    w.plan(mla_plan_args(t_qo, t_indptr, t_ids, t_lens, H, page, sm_scale, true, {.fixed_split_size = 32}));
    w.run(q_nope, q_pe, mla, out, {.lse = lse});

    CaseReport rep;
    const std::vector<double> qn = bf16_values(q_nope), qp = bf16_values(q_pe), o = bf16_values(out);
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t r0 = qo_indptr[b], r1 = qo_indptr[b + 1];
      const std::vector<double> kv = bf16_values(tokens[std::size_t(b)]);
      std::vector<double> ckv, kpe;
      for (std::int32_t j = 0; j < lens[b]; ++j) {
        ckv.insert(ckv.end(), kv.begin() + j * width, kv.begin() + j * width + kDc);
        kpe.insert(kpe.end(), kv.begin() + j * width + kDc, kv.begin() + (j + 1) * width);
      }
      const oracle::MLASpec spec{.qo_len = r1 - r0,
                                 .kv_len = lens[b],
                                 .num_heads = H,
                                 .head_dim_ckv = kDc,
                                 .head_dim_kpe = kDp,
                                 .causal = true,
                                 .sm_scale = sm_scale};
      const std::span<const double> qn_b(qn.data() + r0 * H * kDc, std::size_t((r1 - r0) * H * kDc));
      const std::span<const double> qp_b(qp.data() + r0 * H * kDp, std::size_t((r1 - r0) * H * kDp));
      const oracle::AttentionResult ref = oracle::mla_attention(spec, qn_b, qp_b, ckv, kpe);
      const oracle::AttentionResult naive = mla_naive_f32(spec, qn_b, qp_b, ckv, kpe, DType::kBF16);
      const std::vector<double> lse_b(lse.data_as<const float>() + r0 * H,
                                      lse.data_as<const float>() + r1 * H);
      compare_request(rep, std::span(o.data() + r0 * H * kDc, std::size_t((r1 - r0) * H * kDc)), lse_b, ref,
                      naive, 1.0);
    }
    finish_report(rep, attention_atol(DType::kBF16, DType::kBF16, DType::kBF16));
    EXPECT_TRUE(rep.ok()) << "after appending up to " << lens[0] << "/" << lens[1] << "/" << lens[2] << ": "
                          << rep.summary();
    before = lens;
  }
}

// ---------------------------------------------------------------- fixed capacity
TEST(CpuMLA, FixedCapacityReplansWithoutGrowing) {
  BatchMLAPagedAttention w(Device::cpu(), Capacity{.max_batch = 4, .max_qo_tokens = 16, .max_kv = 32});
  std::vector<std::int32_t> qo{0, 3, 4}, pages{0, 7, 9}, lens{100, 17}, ids(9);
  for (int i = 0; i < 9; ++i) ids[i] = i;
  const Tensor t_qo = int32_tensor(qo), t_pages = int32_tensor(pages), t_lens = int32_tensor(lens);
  const Tensor t_ids = int32_tensor(ids);
  MLAPlanArgs a = mla_plan_args(t_qo, t_pages, t_ids, t_lens, 16, 16, 0.1f, false, {.fixed_split_size = 16});
  const WorkspaceSize first = w.workspace_size(a);
  w.plan(a);
  const std::vector<std::int32_t> qo2{0, 16}, pages2{0, 32}, lens2{512};
  const Tensor t_qo2 = int32_tensor(qo2), t_pages2 = int32_tensor(pages2), t_lens2 = int32_tensor(lens2);
  std::vector<std::int32_t> ids2(32);
  for (int i = 0; i < 32; ++i) ids2[i] = 31 - i;
  const Tensor t_ids2 = int32_tensor(ids2);
  MLAPlanArgs b = a;
  b.qo_indptr = t_qo2;
  b.kv_indptr = t_pages2;
  b.kv_len = t_lens2;
  b.kv_indices = t_ids2;
  const WorkspaceSize second = w.workspace_size(b);
  EXPECT_EQ(first.float_bytes, second.float_bytes);  // sized by the capacity, not the batch
  EXPECT_EQ(first.int_bytes, second.int_bytes);
  EXPECT_NO_THROW(w.plan(b));
}

// ---------------------------------------------------------------- rejected inputs
struct Fixture {
  // Two requests: qo 3 / kv 20 (2 pages), qo 2 / kv 7 (1 page); 4 heads; page 16.
  std::vector<std::int32_t> qo{0, 3, 5}, pages{0, 2, 3}, ids{3, 0, 1}, lens{20, 7};
  Tensor qo_indptr = int32_tensor(qo), kv_indptr = int32_tensor(pages), kv_indices = int32_tensor(ids);
  Tensor kv_len = int32_tensor(lens);
  Tensor cache = Tensor::zeros({4, 16, kDc + kDp}, DType::kBF16);
  Tensor q_nope = Tensor::zeros({5, 4, kDc}, DType::kBF16), q_pe = Tensor::zeros({5, 4, kDp}, DType::kBF16);
  Tensor out = Tensor::zeros({5, 4, kDc}, DType::kBF16), lse = Tensor::zeros({5, 4}, DType::kF32);

  MLAPlanArgs args() const {
    return mla_plan_args(qo_indptr, kv_indptr, kv_indices, kv_len, 4, 16, 0.1f);
  }
  MLACache mla() const { return MLACache::combined(cache); }
};

// The same memory claimed to be on a GPU.
TensorView on_gpu(const TensorView& t) {
  return TensorView(t.data(), t.dtype(), t.shape(), t.strides(), Device::cuda(0));
}

TEST(CpuMLAErrors, PlanArguments) {
  Fixture f;
  BatchMLAPagedAttention w;
  auto with = [&](auto edit) { return plan_edited(w, f.args(), edit); };
  ASSERT_NO_THROW(w.plan(f.args()));
  const Tensor i64 = Tensor::zeros({3}, DType::kI64), i64_2 = Tensor::zeros({2}, DType::kI64);
  const auto ints = [](std::vector<std::int32_t> v) { return int32_tensor(v); };

  expect_error(with([&](auto& a) { a.qo_indptr = {}; }), "qo_indptr");
  expect_error(with([&](auto& a) { a.qo_indptr = i64; }), "qo_indptr.dtype", "int32");
  const Tensor qo_start = ints({1, 3, 5}), qo_dec = ints({0, 3, 2});
  expect_error(with([&](auto& a) { a.qo_indptr = qo_start; }), "qo_indptr[0]");
  expect_error(with([&](auto& a) { a.qo_indptr = qo_dec; }), "qo_indptr[2]");
  expect_error(with([&](auto& a) { a.qo_indptr = on_gpu(f.qo_indptr); }), "qo_indptr.device", "host");

  expect_error(with([&](auto& a) { a.kv_indptr = i64; }), "kv_indptr.dtype", "int32");
  const Tensor kv_short = ints({0, 2}), kv_dec = ints({0, 2, 1}), kv_start = ints({1, 2, 3});
  expect_error(with([&](auto& a) { a.kv_indptr = kv_short; }), "kv_indptr.shape[0]");
  expect_error(with([&](auto& a) { a.kv_indptr = kv_dec; }), "kv_indptr[2]");
  expect_error(with([&](auto& a) { a.kv_indptr = kv_start; }), "kv_indptr[0]");
  expect_error(with([&](auto& a) { a.kv_indptr = on_gpu(f.kv_indptr); }), "kv_indptr.device");

  expect_error(with([&](auto& a) { a.kv_len = {}; }), "kv_len");
  expect_error(with([&](auto& a) { a.kv_len = i64_2; }), "kv_len.dtype", "int32");
  const Tensor len_short = ints({20}), len_over = ints({33, 7}), len_under = ints({16, 7}),
               len_zero = ints({20, 0});
  const Tensor len_neg = ints({20, -1});
  expect_error(with([&](auto& a) { a.kv_len = len_short; }), "kv_len.shape[0]");
  expect_error(with([&](auto& a) { a.kv_len = on_gpu(f.kv_len); }), "kv_len.device");
  expect_error(with([&](auto& a) { a.kv_len = len_over; }), "kv_len[0]", "(16, 32]");
  expect_error(with([&](auto& a) { a.kv_len = len_under; }), "kv_len[0]", "(16, 32]");
  expect_error(with([&](auto& a) { a.kv_len = len_zero; }), "kv_len[1]");
  expect_error(with([&](auto& a) { a.kv_len = len_neg; }), "kv_len[1]");
  const Tensor no_pages = ints({0, 2, 2}), len_no_pages = ints({20, 3});
  expect_error(with([&](auto& a) {
                 a.kv_indptr = no_pages;
                 a.kv_len = len_no_pages;
               }),
               "kv_len[1]", "without pages");

  expect_error(with([&](auto& a) { a.kv_indices = {}; }), "kv_indices");
  expect_error(with([&](auto& a) { a.kv_indices = i64; }), "kv_indices.dtype", "int32");
  const Tensor ids_short = ints({3, 0}), ids_2d = Tensor::zeros({3, 1}, DType::kI32);
  expect_error(with([&](auto& a) { a.kv_indices = ids_short; }), "kv_indices.shape[0]");
  expect_error(with([&](auto& a) { a.kv_indices = ids_2d; }), "kv_indices.shape");
  expect_error(with([&](auto& a) { a.kv_indices = on_gpu(f.kv_indices); }), "kv_indices.device");

  expect_error(with([&](auto& a) { a.num_heads = 0; }), "num_heads");
  expect_error(with([&](auto& a) { a.head_dim_ckv = 256; }), "head_dim_ckv");
  expect_error(with([&](auto& a) { a.head_dim_kpe = 32; }), "head_dim_kpe");
  expect_error(with([&](auto& a) { a.page_size = 0; }), "page_size");
  expect_error(with([&](auto& a) { a.sm_scale.reset(); }), "sm_scale", "explicit");
  expect_error(with([&](auto& a) { a.sm_scale = 0.0f; }), "sm_scale");
  expect_error(with([&](auto& a) { a.sm_scale = -0.5f; }), "sm_scale");
  expect_error(with([&](auto& a) { a.sm_scale = std::numeric_limits<float>::quiet_NaN(); }), "sm_scale");
  expect_error(with([&](auto& a) { a.sm_scale = std::numeric_limits<float>::infinity(); }), "sm_scale");
  expect_error(with([&](auto& a) { a.q_dtype = DType::kF32; }), "q_dtype");
  expect_error(with([&](auto& a) { a.q_dtype = DType::kE4M3; }), "q_dtype");
  expect_error(with([&](auto& a) { a.kv_dtype = DType::kF32; }), "kv_dtype");
  expect_error(with([&](auto& a) { a.kv_dtype = DType::kI32; }), "kv_dtype");
  expect_error(with([&](auto& a) { a.o_dtype = DType::kE4M3; }), "o_dtype");
  expect_error(with([&](auto& a) {
                 a.q_dtype = DType::kF32;
                 a.o_dtype = DType::kBF16;
               }),
               "q_dtype");
  expect_error(with([&](auto& a) { a.split.fixed_split_size = 0; }), "split.fixed_split_size");

  // workspace_size validates the same arguments.
  MLAPlanArgs bad = f.args();
  bad.sm_scale.reset();
  expect_error([&] { (void)w.workspace_size(bad); }, "sm_scale");
}

TEST(CpuMLAErrors, DeviceAndCapacity) {
  if (!cuda_backend_built() || cuda_device_count() == 0) {
    expect_error([] { BatchMLAPagedAttention w(Device::cuda(0)); }, "device");
  }
  expect_error([] { BatchMLAPagedAttention w(Device::cpu(), Capacity{.max_batch = -1}); }, "capacity");
  Fixture f;
  BatchMLAPagedAttention small_batch(Device::cpu(),
                                     Capacity{.max_batch = 1, .max_qo_tokens = 64, .max_kv = 64});
  expect_error([&] { small_batch.plan(f.args()); }, "batch_size", "max_batch");
  BatchMLAPagedAttention few_rows(Device::cpu(), Capacity{.max_batch = 4, .max_qo_tokens = 4, .max_kv = 64});
  expect_error([&] { few_rows.plan(f.args()); }, "qo_indptr[batch_size]", "max_qo_tokens");
  BatchMLAPagedAttention few_pages(Device::cpu(), Capacity{.max_batch = 4, .max_qo_tokens = 64, .max_kv = 2});
  expect_error([&] { few_pages.plan(f.args()); }, "kv_indptr[batch_size]", "max_kv");
}

TEST(CpuMLAErrors, RunArguments) {
  Fixture f;
  BatchMLAPagedAttention w;
  expect_error([&] { w.run(f.q_nope, f.q_pe, f.mla(), f.out); }, "plan", "plan() first");
  w.plan(f.args());
  ASSERT_NO_THROW(w.run(f.q_nope, f.q_pe, f.mla(), f.out, {.lse = f.lse}));
  auto run = [&](const TensorView& qn, const TensorView& qp, const MLACache& c, const TensorView& o,
                 const MLARunOptions& opt = {}) { return [=, &w] { w.run(qn, qp, c, o, opt); }; };

  const Tensor f16_q = Tensor::zeros({5, 4, kDc}, DType::kF16);
  const Tensor short_q = Tensor::zeros({4, 4, kDc}, DType::kBF16),
               heads_q = Tensor::zeros({5, 3, kDc}, DType::kBF16);
  const Tensor dim_q = Tensor::zeros({5, 4, 256}, DType::kBF16),
               rank2 = Tensor::zeros({5, kDc}, DType::kBF16);
  const Tensor wide = Tensor::zeros({5, 4, 2 * kDc}, DType::kBF16);
  const TensorView every_other(wide.data(), DType::kBF16, std::vector<std::int64_t>{5, 4, kDc},
                               std::vector<std::int64_t>{8 * kDc, 2 * kDc, 2});
  expect_error(run({}, f.q_pe, f.mla(), f.out), "q_nope");
  expect_error(run(f16_q, f.q_pe, f.mla(), f.out), "q_nope.dtype");
  expect_error(run(short_q, f.q_pe, f.mla(), f.out), "q_nope.shape[0]");
  expect_error(run(heads_q, f.q_pe, f.mla(), f.out), "q_nope.shape[1]");
  expect_error(run(dim_q, f.q_pe, f.mla(), f.out), "q_nope.shape[2]");
  expect_error(run(rank2, f.q_pe, f.mla(), f.out), "q_nope.shape");
  expect_error(run(every_other, f.q_pe, f.mla(), f.out), "q_nope.stride(-1)");
  expect_error(run(on_gpu(f.q_nope), f.q_pe, f.mla(), f.out), "q_nope.device");

  const Tensor pe32 = Tensor::zeros({5, 4, 32}, DType::kBF16),
               pe_f16 = Tensor::zeros({5, 4, kDp}, DType::kF16);
  expect_error(run(f.q_nope, {}, f.mla(), f.out), "q_pe");
  expect_error(run(f.q_nope, pe32, f.mla(), f.out), "q_pe.shape[2]");
  expect_error(run(f.q_nope, pe_f16, f.mla(), f.out), "q_pe.dtype");

  const Tensor out_f16 = Tensor::zeros({5, 4, kDc}, DType::kF16);
  expect_error(run(f.q_nope, f.q_pe, f.mla(), {}), "out");
  expect_error(run(f.q_nope, f.q_pe, f.mla(), out_f16), "out.dtype");
  expect_error(run(f.q_nope, f.q_pe, f.mla(), dim_q), "out.shape[2]");
  expect_error(run(f.q_nope, f.q_pe, f.mla(), on_gpu(f.out)), "out.device");

  const Tensor lse_f16 = Tensor::zeros({5, 4}, DType::kF16), lse_heads = Tensor::zeros({5, 3}, DType::kF32);
  const Tensor lse_rank3 = Tensor::zeros({5, 4, 1}, DType::kF32);
  expect_error(run(f.q_nope, f.q_pe, f.mla(), f.out, {.lse = lse_f16}), "lse.dtype");
  expect_error(run(f.q_nope, f.q_pe, f.mla(), f.out, {.lse = lse_heads}), "lse.shape[1]");
  expect_error(run(f.q_nope, f.q_pe, f.mla(), f.out, {.lse = lse_rank3}), "lse.shape");
  expect_error(run(f.q_nope, f.q_pe, f.mla(), f.out, {.lse = on_gpu(f.lse)}), "lse.device");

  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  expect_error(run(f.q_nope, f.q_pe, f.mla(), f.out, {.ckv_scale = 0.0f}), "ckv_scale");
  expect_error(run(f.q_nope, f.q_pe, f.mla(), f.out, {.ckv_scale = nan}), "ckv_scale");
  expect_error(run(f.q_nope, f.q_pe, f.mla(), f.out, {.kpe_scale = inf}), "kpe_scale");
  expect_error(run(f.q_nope, f.q_pe, f.mla(), f.out, {.kpe_scale = -1.0f}), "kpe_scale");

  // The cache.
  const Tensor cache_f16 = Tensor::zeros({4, 16, kDc + kDp}, DType::kF16);
  const Tensor cache_page8 = Tensor::zeros({4, 8, kDc + kDp}, DType::kBF16);
  const Tensor cache_nope = Tensor::zeros({4, 16, kDc}, DType::kBF16);
  const Tensor cache_kpe32 = Tensor::zeros({4, 16, kDc + 32}, DType::kBF16);
  const Tensor ckv256 = Tensor::zeros({4, 16, 256}, DType::kBF16),
               kpe = Tensor::zeros({4, 16, kDp}, DType::kBF16);
  const Tensor kpe_f16 = Tensor::zeros({4, 16, kDp}, DType::kF16),
               kpe_3pages = Tensor::zeros({3, 16, kDp}, DType::kBF16);
  const Tensor ckv = Tensor::zeros({4, 16, kDc}, DType::kBF16);
  expect_error(run(f.q_nope, f.q_pe, MLACache::combined(cache_f16), f.out), "ckv_cache.dtype");
  expect_error(run(f.q_nope, f.q_pe, MLACache::combined(cache_page8), f.out), "ckv_cache.shape[1]");
  expect_error(run(f.q_nope, f.q_pe, MLACache::combined(cache_nope), f.out), "kpe_cache", "head_dim_kpe 64");
  expect_error(run(f.q_nope, f.q_pe, MLACache::combined(cache_kpe32), f.out), "kpe_cache.shape[2]");
  expect_error(run(f.q_nope, f.q_pe, MLACache::pair(ckv256, kpe), f.out), "ckv_cache.shape[2]");
  expect_error(run(f.q_nope, f.q_pe, MLACache::pair(ckv, kpe_f16), f.out), "kpe_cache.dtype");
  expect_error(run(f.q_nope, f.q_pe, MLACache::pair(ckv, kpe_3pages), f.out), "kpe_cache.shape[0]");
  expect_error(run(f.q_nope, f.q_pe, MLACache::pair(on_gpu(ckv), on_gpu(kpe)), f.out), "ckv_cache.device");
  expect_error(run(f.q_nope, f.q_pe, MLACache{.ckv = {}, .kpe = {}}, f.out), "ckv_cache");

  // Page ids are read at run: out of range for a cache of 4 pages.
  const Tensor cache3 = Tensor::zeros({3, 16, kDc + kDp}, DType::kBF16);
  expect_error(run(f.q_nope, f.q_pe, MLACache::combined(cache3), f.out), "kv_indices[0]", "[0, 3)");
  f.kv_indices.data_as<std::int32_t>()[2] = -1;
  expect_error(run(f.q_nope, f.q_pe, f.mla(), f.out), "kv_indices[2]");
}

TEST(CpuMLAErrors, WithoutRotaryPart) {
  Fixture f;
  BatchMLAPagedAttention w;
  MLAPlanArgs a = f.args();
  a.head_dim_kpe = 0;
  w.plan(a);
  const Tensor cache_nope = Tensor::zeros({4, 16, kDc}, DType::kBF16);
  EXPECT_NO_THROW(w.run(f.q_nope, {}, MLACache::combined(cache_nope), f.out));
  expect_error([&] { w.run(f.q_nope, f.q_pe, MLACache::combined(cache_nope), f.out); }, "q_pe", "absent");
  expect_error([&] { w.run(f.q_nope, {}, f.mla(), f.out); }, "kpe_cache", "absent");
}

}  // namespace
}  // namespace kvinfer::testing
