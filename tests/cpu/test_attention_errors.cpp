// SPDX-License-Identifier: Apache-2.0
// Every input the attention wrappers reject: a kvinfer::Error naming the argument.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "kvinfer/kvinfer.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"
#include "testing/small_problem.hpp"

namespace kvinfer::testing {
namespace {

struct Fixture : SmallProblem {
  // Two requests: qo 3 / kv 20, qo 2 / kv 7; Hq 4, Hk 2, D 64; page 16.
  Fixture()
      : SmallProblem{int32_tensor({0, 3, 5}), int32_tensor({0, 20, 27}), int32_tensor({0, 2, 3}),
                     int32_tensor({3, 0, 1}), int32_tensor({4, 7})} {}
  Tensor q = Tensor::zeros({5, 4, 64}, DType::kBF16), out = Tensor::zeros({5, 4, 64}, DType::kBF16);
  Tensor k = Tensor::zeros({27, 2, 64}, DType::kBF16), v = Tensor::zeros({27, 2, 64}, DType::kBF16);
  Tensor cache = Tensor::zeros({4, 2, 16, 2, 64}, DType::kBF16);
};

TEST(AttentionErrors, PlanArguments) {
  Fixture f;
  BatchPrefillWithRaggedKVCache w;
  Tensor i64 = Tensor::zeros({3}, DType::kI64);
  auto with = [&](auto edit) { return plan_edited(w, f.ragged(), edit); };
  expect_error(with([&](auto& a) { a.qo_indptr = i64; }), "qo_indptr.dtype", "int32");
  Tensor bad_start = int32_tensor(std::vector<std::int32_t>{1, 3, 5});
  expect_error(with([&](auto& a) { a.qo_indptr = bad_start; }), "qo_indptr[0]");
  Tensor decreasing = int32_tensor(std::vector<std::int32_t>{0, 3, 2});
  expect_error(with([&](auto& a) { a.qo_indptr = decreasing; }), "qo_indptr[2]");
  Tensor short_kv = int32_tensor(std::vector<std::int32_t>{0, 20});
  expect_error(with([&](auto& a) { a.kv_indptr = short_kv; }), "kv_indptr.shape[0]");
  expect_error(with([&](auto& a) { a.num_qo_heads = 5; }), "num_qo_heads");
  expect_error(with([&](auto& a) { a.num_kv_heads = 0; }), "num_kv_heads");
  expect_error(with([&](auto& a) { a.head_dim_qk = 72; }), "head_dim_qk");
  expect_error(with([&](auto& a) { a.head_dim_vo = 1024; }), "head_dim_vo");
  expect_error(with([&](auto& a) { a.q_dtype = DType::kF32; }), "q_dtype");
  expect_error(with([&](auto& a) { a.kv_dtype = DType::kI32; }), "kv_dtype");
  expect_error(with([&](auto& a) { a.o_dtype = DType::kE4M3; }), "o_dtype");
  expect_error(with([&](auto& a) { a.options.window_left = -2; }), "options.window_left");
  expect_error(with([&](auto& a) { a.options.logits_soft_cap = -1.0f; }), "options.logits_soft_cap");
  expect_error(with([&](auto& a) { a.options.sm_scale = 0.0f; }), "options.sm_scale");
  expect_error(with([&](auto& a) {
                 a.options.pos_encoding = PosEncoding::kRopeLlama;
                 a.options.rope_theta = -1.0f;
               }),
               "options.rope_theta");
  expect_error(with([&](auto& a) {
                 a.options.pos_encoding = PosEncoding::kAlibi;
                 a.options.alibi_slopes = {1.0f};
               }),
               "options.alibi_slopes.size()");
  expect_error(with([&](auto& a) { a.split.fixed_split_size = 0; }), "split.fixed_split_size");
  expect_error(with([&](auto& a) { a.options.mask_mode = MaskMode::kCustom; }), "custom_mask");
  // A mask with a mask mode.
  const auto with_mask = [&](MaskMode mode, const Tensor& mask) {
    return with([mode, &mask](auto& a) {
      a.options.mask_mode = mode;
      a.custom_mask = mask;
    });
  };
  Tensor mask = Tensor::zeros({3 * 20 + 2 * 7}, DType::kBool);
  expect_error(with_mask(MaskMode::kCausal, mask), "custom_mask", "causal");
  Tensor short_mask = Tensor::zeros({73}, DType::kBool);
  expect_error(with_mask(MaskMode::kCustom, short_mask), "custom_mask.shape[0]");
  Tensor packed_wrong = Tensor::zeros({10}, DType::kU8);  // needs ceil(60/8) + ceil(14/8) = 8 + 2 bytes
  EXPECT_NO_THROW(with_mask(MaskMode::kCustom, packed_wrong)());
  Tensor packed_short = Tensor::zeros({9}, DType::kU8);
  expect_error(with_mask(MaskMode::kCustom, packed_short), "custom_mask.shape[0]", "byte");
  Tensor f32_mask = Tensor::zeros({74}, DType::kF32);
  expect_error(with_mask(MaskMode::kCustom, f32_mask), "custom_mask.dtype");
  // Lengths must be host arrays for plan().
  TensorView on_gpu(f.qo_indptr.data(), DType::kI32, {3}, Device::cuda(0));
  expect_error(with([&](auto& a) { a.qo_indptr = on_gpu; }), "qo_indptr.device");
}

TEST(AttentionErrors, PagedPlanArguments) {
  Fixture f;
  BatchPrefillWithPagedKVCache w;
  auto with = [&](auto edit) { return plan_edited(w, f.paged(), edit); };
  Tensor last_bad = int32_tensor(std::vector<std::int32_t>{17, 7});
  expect_error(with([&](auto& a) { a.page_table.last_page_len = last_bad; }), "kv_last_page_len[0]");
  Tensor last_zero = int32_tensor(std::vector<std::int32_t>{0, 7});
  expect_error(with([&](auto& a) { a.page_table.last_page_len = last_zero; }), "kv_last_page_len[0]");
  Tensor last_short = int32_tensor(std::vector<std::int32_t>{4});
  expect_error(with([&](auto& a) { a.page_table.last_page_len = last_short; }), "kv_last_page_len.shape[0]");
  Tensor i64 = Tensor::zeros({3}, DType::kI64);
  expect_error(with([&](auto& a) { a.page_table.indices = i64; }), "kv_indices.dtype", "int32");
  expect_error(with([&](auto& a) { a.page_size = 0; }), "page_size");
  Tensor other_batch = int32_tensor(std::vector<std::int32_t>{0, 1});
  Tensor one_last = int32_tensor(std::vector<std::int32_t>{3});
  expect_error(with([&](auto& a) {
                 a.page_table.indptr = other_batch;
                 a.page_table.last_page_len = one_last;
               }),
               "kv_indptr.shape[0]");
  // An empty request with a non-zero last_page_len.
  Tensor empty_indptr = int32_tensor(std::vector<std::int32_t>{0, 0, 1});
  Tensor empty_last = int32_tensor(std::vector<std::int32_t>{3, 7});
  expect_error(with([&](auto& a) {
                 a.page_table.indptr = empty_indptr;
                 a.page_table.last_page_len = empty_last;
               }),
               "kv_last_page_len[0]");
}

TEST(AttentionErrors, DecodeRejectsMasks) {
  Fixture f;
  BatchDecodeWithPagedKVCache w;
  DecodePlanArgs a = f.decode();
  a.options.mask_mode = MaskMode::kCausal;
  expect_error([&] { w.plan(a); }, "options.mask_mode");
}

TEST(AttentionErrors, RunArguments) {
  Fixture f;
  BatchPrefillWithRaggedKVCache w;
  expect_error([&] { w.run(f.q, f.k, f.v, f.out); }, "plan");
  w.plan(f.ragged());
  EXPECT_NO_THROW(w.run(f.q, f.k, f.v, f.out));
  Tensor q_f16 = Tensor::zeros({5, 4, 64}, DType::kF16);
  expect_error([&] { w.run(q_f16, f.k, f.v, f.out); }, "q.dtype");
  Tensor q_short = Tensor::zeros({4, 4, 64}, DType::kBF16);
  expect_error([&] { w.run(q_short, f.k, f.v, f.out); }, "q.shape[0]");
  Tensor q_rank = Tensor::zeros({5, 256}, DType::kBF16);
  expect_error([&] { w.run(q_rank, f.k, f.v, f.out); }, "q.shape");
  const std::int64_t shape[] = {5, 4, 64}, strides[] = {512, 128, 2};
  Tensor big = Tensor::zeros({5 * 512}, DType::kBF16);
  expect_error([&] { w.run(TensorView(big.data(), DType::kBF16, shape, strides), f.k, f.v, f.out); }, "q.stride(-1)");
  Tensor k_short = Tensor::zeros({26, 2, 64}, DType::kBF16);
  expect_error([&] { w.run(f.q, k_short, f.v, f.out); }, "k.shape[0]");
  Tensor v_heads = Tensor::zeros({27, 4, 64}, DType::kBF16);
  expect_error([&] { w.run(f.q, f.k, v_heads, f.out); }, "v.shape[1]");
  Tensor out_dim = Tensor::zeros({5, 4, 128}, DType::kBF16);
  expect_error([&] { w.run(f.q, f.k, f.v, out_dim); }, "out.shape[2]");
  Tensor lse_bad = Tensor::zeros({5, 3}, DType::kF32);
  expect_error([&] { w.run(f.q, f.k, f.v, f.out, {.lse = lse_bad}); }, "lse.shape[1]");
  Tensor lse_dtype = Tensor::zeros({5, 4}, DType::kF16);
  expect_error([&] { w.run(f.q, f.k, f.v, f.out, {.lse = lse_dtype}); }, "lse.dtype");
  expect_error([&] { w.run(f.q, f.k, f.v, f.out, {.k_scale = 0.0f}); }, "k_scale");
  TensorView q_gpu(f.q.data(), DType::kBF16, {5, 4, 64}, Device::cuda(0));
  expect_error([&] { w.run(q_gpu, f.k, f.v, f.out); }, "q.device");
}

TEST(AttentionErrors, PagedRunArguments) {
  Fixture f;
  BatchPrefillWithPagedKVCache w;
  w.plan(f.paged());
  const PagedKVCache cache = PagedKVCache::combined(f.cache);
  EXPECT_NO_THROW(w.run(f.q, cache, f.out));
  const PagedKVCache hnd = PagedKVCache::combined(f.cache, KVLayout::kHND);
  expect_error([&] { w.run(f.q, hnd, f.out); }, "paged_kv_cache.layout");
  Tensor small_pages = Tensor::zeros({4, 2, 8, 2, 64}, DType::kBF16);
  expect_error([&] { w.run(f.q, PagedKVCache::combined(small_pages), f.out); }, "paged_kv_cache.k.shape[1]");
  Tensor fp8 = Tensor::zeros({4, 2, 16, 2, 64}, DType::kE4M3);
  expect_error([&] { w.run(f.q, PagedKVCache::combined(fp8), f.out); }, "paged_kv_cache.k.dtype");
  // A page id beyond the cache: caught at run on the CPU.
  f.page_indices.data_as<std::int32_t>()[1] = 4;
  w.plan(f.paged());
  expect_error([&] { w.run(f.q, cache, f.out); }, "kv_indices[1]");
}

// single_prefill takes its mask flat, packed or as bool [qo_len, kv_len]; the 2-D
// form is read as the flat one, so it must have that shape and be row-major.
TEST(AttentionErrors, SinglePrefillTwoDimensionalMask) {
  Tensor q = Tensor::zeros({3, 4, 64}, DType::kBF16), out = Tensor::zeros({3, 4, 64}, DType::kBF16);
  Tensor k = Tensor::zeros({20, 2, 64}, DType::kBF16), v = Tensor::zeros({20, 2, 64}, DType::kBF16);
  const auto with_mask = [&](const TensorView& mask) {
    return [&, mask] {
      single_prefill(q, k, v, out, {.options = {.mask_mode = MaskMode::kCustom}, .custom_mask = mask});
    };
  };
  Tensor mask = Tensor::zeros({3, 20}, DType::kBool);
  EXPECT_NO_THROW(with_mask(mask)());
  Tensor transposed_shape = Tensor::zeros({20, 3}, DType::kBool);
  expect_error(with_mask(transposed_shape), "custom_mask.shape", "[qo_len, kv_len] = [3, 20]");
  // Every other column of a [3, 40] mask: the right shape, not row-major.
  Tensor wide = Tensor::zeros({3, 40}, DType::kBool);
  const std::int64_t shape[] = {3, 20}, strides[] = {40, 2};
  expect_error(with_mask(TensorView(wide.data(), DType::kBool, shape, strides)), "custom_mask", "contiguous");
  // Its transpose (column-major): likewise.
  Tensor t = Tensor::zeros({20, 3}, DType::kBool);
  const std::int64_t t_strides[] = {1, 3};
  expect_error(with_mask(TensorView(t.data(), DType::kBool, shape, t_strides)), "custom_mask", "contiguous");
}

// Errors name the function called: single_prefill and single_decode (not the ragged
// wrapper they plan with), a wrapper's constructor its wrapper (not "attention").
TEST(AttentionErrors, NameTheFunctionCalled) {
  const auto bf16 = [](Shape shape) { return Tensor::zeros(shape, DType::kBF16); };
  Tensor q = bf16({3, 4, 64}), k = bf16({20, 2, 64}), v = bf16({20, 2, 64}), out = bf16({3, 4, 64});
  Tensor q1 = bf16({4, 64}), out1 = bf16({4, 64});
  Tensor k_f32 = Tensor::zeros({20, 2, 64}, DType::kF32), lse_f16 = Tensor::zeros({3, 4}, DType::kF16);
  Tensor q72 = bf16({3, 4, 72}), out72 = bf16({3, 4, 72}), k72 = bf16({20, 2, 72});
  Tensor v_short = bf16({19, 2, 64}), out_short = bf16({2, 4, 64}), out1_dim = bf16({4, 128});
  Tensor lse1_short = Tensor::zeros({3}, DType::kF32);
  struct Case {
    std::string_view op;
    std::function<void()> call;
    std::string_view argument;
  };
  const Case cases[] = {
      // single_prefill: its own checks, the plan's, the run's and the constructor's.
      {"single_prefill", [&] { single_prefill(q, k, v, out_short); }, "out.shape[0]"},
      {"single_prefill", [&] { single_prefill(q, k, v_short, out); }, "v.shape[0]"},
      {"single_prefill", [&] { single_prefill(q72, k72, k72, out72); }, "head_dim_qk"},
      {"single_prefill", [&] { single_prefill(q, k_f32, k_f32, out); }, "kv_dtype"},
      {"single_prefill", [&] { single_prefill(q, k, v, out, {.options = {.mask_mode = MaskMode::kCustom}}); },
       "custom_mask"},
      {"single_prefill", [&] { single_prefill(q, k, v, out, {}, {.lse = lse_f16}); }, "lse.dtype"},
      {"single_prefill", [&] { single_prefill(q, k, v, out, {}, {.k_scale = 0.0f}); }, "k_scale"},
      {"single_prefill", [&] { single_prefill(q, k, v, out, {.kv_layout = KVLayout(3)}); }, "kv_layout"},
      // single_decode: likewise, its 2-D shapes named as the caller passed them.
      {"single_decode", [&] { single_decode(q1, k_f32, k_f32, out1); }, "kv_dtype"},
      {"single_decode", [&] { single_decode(q1, k, v, out1_dim); }, "out.shape[1]"},
      {"single_decode", [&] { single_decode(q1, k, v, out1, {}, {.lse = lse1_short}); }, "lse.shape[0]"},
      {"single_decode", [&] { single_decode(q1, k, v, out1, {.options = {.sm_scale = -1.0f}}); },
       "options.sm_scale"},
      {"single_decode", [&] { single_decode(q1, k, v, out1, {}, {.v_scale = INFINITY}); }, "v_scale"},
      {"single_decode", [&] { single_decode(q1, k, v, out1, {.kv_layout = KVLayout(3)}); }, "kv_layout"},
      // The constructors.
      {"BatchPrefillWithRaggedKVCache", [] { BatchPrefillWithRaggedKVCache w(Device::cpu(), KVLayout(3)); },
       "kv_layout"},
      {"BatchPrefillWithPagedKVCache", [] { BatchPrefillWithPagedKVCache w(Device::cpu(), KVLayout(3)); },
       "kv_layout"},
      {"BatchDecodeWithPagedKVCache", [] { BatchDecodeWithPagedKVCache w(Device::cpu(), KVLayout(3)); },
       "kv_layout"},
      {"BatchDecodeWithPagedKVCache",
       [] { BatchDecodeWithPagedKVCache w(Device::cpu(), KVLayout::kNHD, Capacity{.max_batch = -1}); }, "capacity"},
      {"MultiLevelCascadeAttention", [] { MultiLevelCascadeAttention w(2, Device::cpu(), KVLayout(3)); },
       "kv_layout"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.op) + " " + std::string(c.argument));
    expect_error_of(c.op, c.call, c.argument);
  }
}

TEST(AttentionErrors, CapacityExceeded) {
  Fixture f;
  BatchPrefillWithRaggedKVCache w(Device::cpu(), KVLayout::kNHD, Capacity{.max_batch = 1, .max_qo_tokens = 8, .max_kv = 64});
  expect_error([&] { w.plan(f.ragged()); }, "batch_size");
}

}  // namespace
}  // namespace kvinfer::testing
