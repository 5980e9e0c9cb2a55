// SPDX-License-Identifier: Apache-2.0
// Counts and sizes at the edges of their types: every count a caller gives is
// range-checked before it is multiplied (an error naming it, never an overflow or a
// std::bad_alloc / std::length_error), enumerations out of range are errors, and the
// values near INT32_MAX that are valid give the right result (windows, kv_len).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"
#include "testing/small_problem.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int32_t kI32Max = std::numeric_limits<std::int32_t>::max();

// One request: qo 3 / kv 20 (2 pages).
struct Small : SmallProblem {
  Small()
      : SmallProblem{int32_tensor({0, 3}), int32_tensor({0, 20}), int32_tensor({0, 2}), int32_tensor({1, 0}),
                     int32_tensor({4})} {}
};

TEST(InputBounds, HeadCountsAreBoundedBeforeAnyProduct) {
  Small s;
  BatchPrefillWithRaggedKVCache w;
  for (const std::int64_t heads : {std::int64_t(1) << 40, kI64Max, std::int64_t(1) << 17}) {
    RaggedPrefillPlanArgs a = s.ragged();
    a.num_qo_heads = heads;
    a.num_kv_heads = heads;
    expect_error([&] { w.plan(a); }, "num_qo_heads", "must be in [1, 65536]");
    expect_error([&] { (void)w.workspace_size(a); }, "num_qo_heads");
    a.num_qo_heads = 4;
    expect_error([&] { w.plan(a); }, "num_kv_heads");
  }
  BatchMLAPagedAttention mla;
  Tensor kv_len = int32_tensor(std::vector<std::int32_t>{20});
  for (const std::int64_t heads : {std::int64_t(1) << 40, kI64Max}) {
    expect_error([&] {
      mla.plan({.qo_indptr = s.qo_indptr, .kv_indptr = s.page_indptr, .kv_indices = s.page_indices, .kv_len = kv_len,
                .num_heads = heads, .page_size = 16, .sm_scale = 0.1f});
    }, "num_heads");
  }
  // A request's rows times the group must fit the int32 rows of a work item.
  RaggedPrefillPlanArgs a = s.ragged();
  Tensor long_qo = int32_tensor(std::vector<std::int32_t>{0, 1 << 20});
  a.qo_indptr = long_qo;
  a.num_qo_heads = 1 << 14;
  a.num_kv_heads = 1;
  expect_error([&] { w.plan(a); }, "qo_indptr", "int32");
}

TEST(InputBounds, PageSizesAreBounded) {
  Small s;
  BatchDecodeWithPagedKVCache d;
  BatchPrefillWithPagedKVCache p;
  for (const std::int64_t page : {std::int64_t(1) << 40, kI64Max, std::int64_t(kI32Max) + 1}) {
    DecodePlanArgs a = s.decode();
    a.page_size = page;
    expect_error([&] { d.plan(a); }, "page_size");
    PagedPrefillPlanArgs b = s.paged();
    b.page_size = page;
    expect_error([&] { p.plan(b); }, "page_size");
    expect_error([&] { get_seq_lens(s.page_indptr, s.last_page, page, Tensor::zeros({1}, DType::kI32)); }, "page_size");
  }
  // The largest page size is valid: 2 pages of 2^31 - 1 make kv_len > INT32_MAX, an error.
  DecodePlanArgs a = s.decode();
  a.page_size = kI32Max;
  Tensor full = int32_tensor(std::vector<std::int32_t>{kI32Max});
  a.page_table.last_page_len = full;
  expect_error([&] { d.plan(a); }, "kv_len[0]", "int32");
}

TEST(InputBounds, CapacitiesAreBoundedAndSizeNoMoreThanNeeded) {
  Small s;
  for (const Capacity c : {Capacity{std::int64_t(1) << 40, 8, 8}, Capacity{8, kI64Max, 8}, Capacity{8, 8, kI64Max},
                           Capacity{-1, 8, 8}, Capacity{8, std::int64_t(kI32Max) + 1, 8}}) {
    expect_error([&] { BatchPrefillWithRaggedKVCache w(Device::cpu(), KVLayout::kNHD, c); }, "capacity");
    expect_error([&] { BatchMLAPagedAttention w(Device::cpu(), c); }, "capacity");
  }
  // Within int32 but far beyond any tensor: plan() refuses before allocating.
  for (const auto& [c, arg] : {std::pair{Capacity{kI32Max, kI32Max, kI32Max}, "capacity.max_qo_tokens"},
                               std::pair{Capacity{8, kI32Max, 64}, "capacity.max_qo_tokens"},
                               std::pair{Capacity{kI32Max, 8, 64}, "work items"},
                               std::pair{Capacity{1 << 24, 1 << 24, 64}, "work items"}}) {
    BatchPrefillWithRaggedKVCache w(Device::cpu(), KVLayout::kNHD, c);
    expect_error([&] { w.plan(s.ragged()); }, arg);
    expect_error([&] { (void)w.workspace_size(s.ragged()); }, arg);
  }
  // A fixed capacity with splitting disabled needs no float workspace at all.
  const Capacity cap{64, 4096, 1 << 20};
  BatchPrefillWithRaggedKVCache split(Device::cpu(), KVLayout::kNHD, cap), whole(Device::cpu(), KVLayout::kNHD, cap);
  RaggedPrefillPlanArgs a = s.ragged();
  EXPECT_GT(split.workspace_size(a).float_bytes, 0u);
  a.split.disable_split_kv = true;
  EXPECT_EQ(whole.workspace_size(a).float_bytes, 0u);
  whole.plan(a);
  Rng rng(1);
  Tensor q = random_bf16({3, 4, 64}, rng), k = random_bf16({20, 2, 64}, rng), v = random_bf16({20, 2, 64}, rng);
  Tensor out = Tensor::empty({3, 4, 64}, DType::kBF16);
  whole.run(q, k, v, out);
  // A fixed split size so small that the capacity's worst case has too many items.
  BatchPrefillWithRaggedKVCache fine(Device::cpu(), KVLayout::kNHD, Capacity{64, 4096, kI32Max});
  a.split = {.fixed_split_size = 1};
  expect_error([&] { fine.plan(a); }, "work items");
}

TEST(InputBounds, LengthsNear2To31WithTinyTensorsAreErrors) {
  Rng rng(2);
  Tensor q = random_bf16({1, 4, 64}, rng), k = random_bf16({4, 2, 64}, rng), v = random_bf16({4, 2, 64}, rng);
  Tensor out = Tensor::empty({1, 4, 64}, DType::kBF16);
  BatchPrefillWithRaggedKVCache w;
  // Query rows near 2^31: more work items than a plan holds.
  Tensor qo_big = int32_tensor(std::vector<std::int32_t>{0, kI32Max}), kv_small = int32_tensor(std::vector<std::int32_t>{0, 4});
  expect_error([&] {
    w.plan({.qo_indptr = qo_big, .kv_indptr = kv_small, .num_qo_heads = 2, .num_kv_heads = 2, .head_dim_qk = 64});
  }, "work items");
  expect_error([&] {  // and with a GQA group, more packed rows than int32 holds
    w.plan({.qo_indptr = qo_big, .kv_indptr = kv_small, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim_qk = 64});
  }, "qo_indptr");
  // Keys near 2^31: a valid plan, and run() rejects the 4-row k.
  Tensor qo_one = int32_tensor(std::vector<std::int32_t>{0, 1}), kv_big = int32_tensor(std::vector<std::int32_t>{0, kI32Max});
  for (const SplitOptions split : {SplitOptions{}, SplitOptions{.fixed_split_size = 1 << 20}, SplitOptions{.disable_split_kv = true}}) {
    w.plan({.qo_indptr = qo_one, .kv_indptr = kv_big, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim_qk = 64,
            .split = split});
    expect_error([&] { w.run(q, k, v, out); }, "k.shape[0]");
  }
  // Split into single keys: too many work items.
  expect_error([&] {
    w.plan({.qo_indptr = qo_one, .kv_indptr = kv_big, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim_qk = 64,
            .split = {.fixed_split_size = 1}});
  }, "work items");
  // fixed_split_size near INT64_MAX is a split that never cuts.
  w.plan({.qo_indptr = qo_one, .kv_indptr = kv_small, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim_qk = 64,
          .split = {.fixed_split_size = kI64Max}});
  w.run(q, k, v, out);
  // Paged: an indptr near 2^31 with a short kv_indices.
  Tensor p_indptr = int32_tensor(std::vector<std::int32_t>{0, kI32Max}), p_indices = int32_tensor(std::vector<std::int32_t>{0});
  Tensor p_last = int32_tensor(std::vector<std::int32_t>{1});
  BatchDecodeWithPagedKVCache d;
  expect_error([&] {
    d.plan({.page_table = {p_indptr, p_indices, p_last}, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 64,
            .page_size = 1});
  }, "kv_indices.shape[0]");
  // MLA: kv_len near 2^31 over a page count that cannot hold it.
  BatchMLAPagedAttention mla;
  Tensor mla_kv_indptr = int32_tensor(std::vector<std::int32_t>{0, 1}), mla_len = int32_tensor(std::vector<std::int32_t>{kI32Max});
  expect_error([&] {
    mla.plan({.qo_indptr = qo_one, .kv_indptr = mla_kv_indptr, .kv_indices = p_indices, .kv_len = mla_len,
              .num_heads = 16, .page_size = 64, .sm_scale = 0.1f});
  }, "kv_len[0]");
}

TEST(InputBounds, EnumerationsOutOfRangeAreErrors) {
  Small s;
  BatchPrefillWithRaggedKVCache w;
  RaggedPrefillPlanArgs a = s.ragged();
  a.options.mask_mode = MaskMode(7);
  expect_error([&] { w.plan(a); }, "options.mask_mode");
  a = s.ragged();
  a.options.pos_encoding = PosEncoding(9);
  expect_error([&] { w.plan(a); }, "options.pos_encoding");
  a = s.ragged();
  a.options.backend = PrefillBackend(-1);
  expect_error([&] { w.plan(a); }, "options.backend");
  a = s.ragged();
  a.q_dtype = DType(77);
  expect_error([&] { w.plan(a); }, "q_dtype");
  expect_error([] { BatchDecodeWithPagedKVCache d(Device::cpu(), KVLayout(5)); }, "kv_layout");
  expect_error([] { single_decode(Tensor::zeros({4, 64}, DType::kBF16), Tensor::zeros({3, 2, 64}, DType::kBF16),
                                  Tensor::zeros({3, 2, 64}, DType::kBF16), Tensor::zeros({4, 64}, DType::kBF16),
                                  {.kv_layout = KVLayout(2)}); },
               "kv_layout");
  Tensor cache = Tensor::zeros({2, 2, 16, 2, 64}, DType::kBF16);
  PagedKVCache bad_layout = PagedKVCache::combined(cache);
  bad_layout.layout = KVLayout(3);
  BatchDecodeWithPagedKVCache d;
  d.plan(s.decode());
  Tensor q = Tensor::zeros({1, 4, 64}, DType::kBF16), out = Tensor::zeros({1, 4, 64}, DType::kBF16);
  expect_error([&] { d.run(q, bad_layout, out); }, "paged_kv_cache.layout");
  Tensor k = Tensor::zeros({1, 2, 64}, DType::kBF16);
  Tensor bi = int32_tensor(std::vector<std::int32_t>{0}), pos = int32_tensor(std::vector<std::int32_t>{0});
  expect_error([&] { append_paged_kv_cache(k, k, bi, pos, bad_layout, s.table()); }, "kv_cache.layout");
  expect_error([] { packbits(Tensor::zeros({8}, DType::kBool), BitOrder(4)); }, "bitorder");
  std::uint8_t byte = 0;
  expect_error([&] { TensorView(&byte, DType(42), {1}); }, "dtype");
  // Cascades pass their options to every level.
  MultiLevelCascadeAttention c(1);
  CascadePlanArgs ca{.levels = {{.qo_indptr = s.qo_indptr, .page_table = s.table()}}, .num_qo_heads = 4, .num_kv_heads = 2,
                     .head_dim = 64, .page_size = 16};
  ca.options.mask_mode = MaskMode(3);
  expect_error([&] { c.plan(ca); }, "options.mask_mode");
}

TEST(InputBounds, ShapesWhoseSizeOverflowsAreErrors) {
  expect_error([] { Tensor::empty({std::int64_t(1) << 40, std::int64_t(1) << 40}, DType::kF32); }, "shape");
  expect_error([] { Tensor::empty({kI64Max, 2}, DType::kF32); }, "shape");
}

// bf16 values as float, bit for bit comparable.
std::vector<std::uint16_t> bits(const TensorView& t) {
  const auto* p = t.data_as<const std::uint16_t>();
  return {p, p + t.numel()};
}

// A window at least as long as every request is no window: window_left near
// INT32_MAX gives what -1 gives, bit for bit (it once overflowed into zeros).
TEST(InputBounds, WindowsNearInt32MaxAreNoWindow) {
  Rng rng(3);
  Tensor qo = int32_tensor(std::vector<std::int32_t>{0, 9, 12}), kv = int32_tensor(std::vector<std::int32_t>{0, 5, 70});
  Tensor q = random_bf16({12, 4, 64}, rng), k = random_bf16({70, 2, 64}, rng), v = random_bf16({70, 2, 64}, rng);
  const auto run = [&](int window, MaskMode mode) {
    Tensor out = Tensor::empty({12, 4, 64}, DType::kBF16);
    BatchPrefillWithRaggedKVCache w;
    w.plan({.qo_indptr = qo, .kv_indptr = kv, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim_qk = 64,
            .options = {.mask_mode = mode, .window_left = window}});
    w.run(q, k, v, out);
    return bits(out);
  };
  for (const MaskMode mode : {MaskMode::kNone, MaskMode::kCausal}) {
    const std::vector<std::uint16_t> none = run(-1, mode);
    for (const int w : {kI32Max, kI32Max - 1, kI32Max - 20, 1 << 30, 70}) EXPECT_EQ(run(w, mode), none) << w;
    EXPECT_NE(run(3, mode), none);
  }
  // With a fixed capacity the window is compared with the capacity's longest request:
  // within it, window + rows beyond int32 is an error, never an overflow.
  BatchPrefillWithRaggedKVCache w(Device::cpu(), KVLayout::kNHD, Capacity{4, 64, kI32Max});
  expect_error([&] {
    w.plan({.qo_indptr = qo, .kv_indptr = kv, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim_qk = 64,
            .options = {.window_left = kI32Max - 10}, .split = {.disable_split_kv = true}});
  }, "options.window_left");
}

// kv_len within 32 of INT32_MAX: a decode over a cache whose pages and tokens are
// views of one row (strides 0), attended through a window, so that the key loop
// runs at the end of int32's range (it once overflowed there and read wild memory).
TEST(InputBounds, KeysNearInt32MaxAreAttended) {
  Rng rng(4);
  constexpr std::int64_t kPage = std::int64_t(1) << 30;
  for (const std::int32_t last : {std::int32_t(kPage - 1), std::int32_t(kPage - 6), std::int32_t(kPage - 31)}) {
    const std::int64_t kv_len = kPage + last;  // 2^31 - 1, - 6, - 31
    ASSERT_LE(kv_len, kI32Max);
    Tensor row = random_bf16({2, 2, 64}, rng);  // one K row and one V row of 2 heads
    const std::vector<std::int64_t> shape{2, kPage, 2, 64}, strides{0, 0, 64, 1};
    const TensorView k(row.data(), DType::kBF16, shape, strides);
    const TensorView v(row.view().select(0, 1).data(), DType::kBF16, shape, strides);
    Tensor indptr = int32_tensor(std::vector<std::int32_t>{0, 2}), indices = int32_tensor(std::vector<std::int32_t>{1, 0});
    Tensor last_t = int32_tensor(std::vector<std::int32_t>{last});
    Tensor q = random_bf16({1, 4, 64}, rng), out = Tensor::empty({1, 4, 64}, DType::kBF16);
    Tensor lse = Tensor::empty({1, 4}, DType::kF32);
    for (const int window : {40, 100}) {
      BatchDecodeWithPagedKVCache w;
      w.plan({.page_table = {indptr, indices, last_t}, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 64,
              .page_size = kPage, .options = {.window_left = window}, .split = {.fixed_split_size = 32}});
      w.run(q, PagedKVCache{k, v, KVLayout::kNHD}, out, {.lse = lse});
      // Every visible key is the same row: o is that V row, LSE = s + log2(window + 1).
      for (std::int64_t h = 0; h < 4; ++h) {
        for (std::int64_t d = 0; d < 64; ++d) {
          const float want = bf16_to_f32(row.data_as<const std::uint16_t>()[64 * 2 + (h / 2) * 64 + d]);
          ASSERT_NEAR(bf16_to_f32(out.data_as<const std::uint16_t>()[h * 64 + d]), want, 1e-2 * (1 + std::abs(want)));
        }
        EXPECT_TRUE(std::isfinite(lse.data_as<const float>()[h]));
      }
    }
  }
}

}  // namespace
}  // namespace kvinfer::testing
