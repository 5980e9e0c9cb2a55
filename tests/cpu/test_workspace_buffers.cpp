// SPDX-License-Identifier: Apache-2.0
// Caller-owned workspace buffers (reset_workspace_buffer): results equal to the
// wrapper's own workspace bit for bit, one float buffer shared by several wrappers,
// and a clear error naming the buffer and the bytes a plan needs.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#include "testing/cascade_case.hpp"
#include "testing/expect_error.hpp"
#include "testing/host_buffer.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

// A decode problem split into many chunks, so that the float workspace holds
// partial states that the merge reads.
struct DecodeProblem {
  HostPageTable table;
  Tensor cache, q;
  DecodePlanArgs args;

  explicit DecodeProblem(std::uint64_t seed, std::vector<std::int32_t> kv_lens = {300, 7, 0, 129}) {
    Rng rng(seed);
    table = random_page_table(kv_lens, 16, 3, rng);
    cache = Tensor::empty({table.num_pages, 2, 16, 2, 64}, DType::kBF16);
    fill_normal(cache, rng);
    q = Tensor::empty({std::int64_t(kv_lens.size()), 8, 64}, DType::kBF16);
    fill_normal(q, rng);
    args = {.page_table = table.view(),
            .num_qo_heads = 8,
            .num_kv_heads = 2,
            .head_dim = 64,
            .page_size = 16,
            .split = {.fixed_split_size = 32}};
  }

  std::vector<std::uint8_t> run(BatchDecodeWithPagedKVCache& w) const {
    Tensor out = Tensor::empty({q.size(0), 8, 64}, DType::kBF16);
    fill_bytes(out, 0xFF);
    w.run(q, PagedKVCache::combined(cache), out);
    std::vector<std::uint8_t> bytes(out.nbytes());
    std::memcpy(bytes.data(), out.data(), bytes.size());
    return bytes;
  }
};

TEST(WorkspaceBuffers, CallerBuffersGiveTheSameBits) {
  const DecodeProblem p(1);
  BatchDecodeWithPagedKVCache own;
  own.plan(p.args);

  BatchDecodeWithPagedKVCache caller;
  const WorkspaceSize need = caller.workspace_size(p.args);
  ASSERT_GT(need.float_bytes, 0u) << "the split plan should use partial states";
  Tensor float_ws = Tensor::empty({std::int64_t(need.float_bytes)}, DType::kU8);
  Tensor int_ws = Tensor::empty({std::int64_t(need.int_bytes)}, DType::kU8);
  fill_bytes(float_ws, 0xFF);
  caller.reset_workspace_buffer(float_ws, int_ws);
  caller.plan(p.args);
  EXPECT_EQ(p.run(own), p.run(caller));
  // The partial states went to the caller's buffer.
  const auto* f = float_ws.data_as<const std::uint8_t>();
  EXPECT_TRUE(std::any_of(f, f + float_ws.nbytes(), [](std::uint8_t b) { return b != 0xFF; }));
}

TEST(WorkspaceBuffers, OneFloatBufferServesSeveralWrappers) {
  const DecodeProblem a(2), b(3, {17, 260});
  BatchDecodeWithPagedKVCache ref_a, ref_b;
  ref_a.plan(a.args);
  ref_b.plan(b.args);

  Tensor shared = Tensor::empty({1 << 20}, DType::kU8);
  BatchDecodeWithPagedKVCache wa, wb;
  wa.reset_workspace_buffer(shared);
  wb.reset_workspace_buffer(shared);
  wa.plan(a.args);
  wb.plan(b.args);
  // Interleaved runs, as the layers of a model: each run's partial states are merged
  // before the next run overwrites them.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(a.run(ref_a), a.run(wa));
    EXPECT_EQ(b.run(ref_b), b.run(wb));
  }
}

TEST(WorkspaceBuffers, ChangingTheIntBufferKeepsThePlan) {
  const DecodeProblem p(4);
  BatchDecodeWithPagedKVCache w;
  w.plan(p.args);
  const auto expected = p.run(w);
  const WorkspaceSize need = w.workspace_size(p.args);
  Tensor int_ws = Tensor::empty({std::int64_t(need.int_bytes)}, DType::kU8);
  w.reset_workspace_buffer({}, int_ws);  // the plan in place is copied into it
  EXPECT_EQ(expected, p.run(w));
  w.reset_workspace_buffer({}, {});  // back to the wrapper's own
  EXPECT_EQ(expected, p.run(w));
}

TEST(WorkspaceBuffers, TooSmallNamesTheBufferAndTheBytes) {
  const DecodeProblem p(5);
  BatchDecodeWithPagedKVCache w;
  const WorkspaceSize need = w.workspace_size(p.args);
  Tensor small = Tensor::empty({std::int64_t(need.float_bytes) - 256}, DType::kU8);
  w.reset_workspace_buffer(small);
  expect_error([&] { w.plan(p.args); }, "float_workspace_buffer",
               std::to_string(need.float_bytes) + " bytes");

  Tensor small_int = Tensor::empty({16}, DType::kU8);
  BatchDecodeWithPagedKVCache w2;
  w2.reset_workspace_buffer({}, small_int);
  expect_error([&] { w2.plan(p.args); }, "int_workspace_buffer", std::to_string(need.int_bytes) + " bytes");

  // With a plan in place, a buffer it does not fit is refused and the plan still runs.
  BatchDecodeWithPagedKVCache w3;
  w3.plan(p.args);
  const auto expected = p.run(w3);
  expect_error([&] { w3.reset_workspace_buffer(small); }, "float_workspace_buffer");
  EXPECT_EQ(expected, p.run(w3));
}

TEST(WorkspaceBuffers, RejectsMisalignedAndStridedBuffers) {
  Tensor t = Tensor::empty({4096}, DType::kU8);
  BatchDecodeWithPagedKVCache w;
  expect_error([&] { w.reset_workspace_buffer(t.view().slice(0, 1, 4096)); }, "float_workspace_buffer",
               "aligned");
  const std::int64_t shape[] = {1024}, strides[] = {2};
  expect_error([&] { w.reset_workspace_buffer(TensorView(t.data(), DType::kU8, shape, strides)); },
               "float_workspace_buffer", "contiguous");
}

TEST(WorkspaceBuffers, RaggedPrefillAndMLA) {
  Rng rng(6);
  const std::vector<std::int32_t> qo{0, 5, 12}, kv{0, 40, 300};
  Tensor q = Tensor::empty({12, 4, 64}, DType::kF16), k = Tensor::empty({300, 4, 64}, DType::kF16),
         v = Tensor::empty({300, 4, 64}, DType::kF16);
  for (Tensor* t : {&q, &k, &v}) fill_normal(*t, rng);
  const RaggedPrefillPlanArgs args{
      .qo_indptr = TensorView(const_cast<std::int32_t*>(qo.data()), DType::kI32, {3}),
      .kv_indptr = TensorView(const_cast<std::int32_t*>(kv.data()), DType::kI32, {3}),
      .num_qo_heads = 4,
      .num_kv_heads = 4,
      .head_dim_qk = 64,
      .options = {.mask_mode = MaskMode::kCausal},
      .q_dtype = DType::kF16,
      .kv_dtype = DType::kF16,
      .o_dtype = DType::kF16,
      .split = {.fixed_split_size = 64}};
  const auto run = [&](BatchPrefillWithRaggedKVCache& w) {
    Tensor out = Tensor::empty({12, 4, 64}, DType::kF16);
    fill_bytes(out, 0xFF);
    w.run(q, k, v, out);
    return std::vector<std::uint8_t>(out.data_as<std::uint8_t>(), out.data_as<std::uint8_t>() + out.nbytes());
  };
  BatchPrefillWithRaggedKVCache own, caller;
  own.plan(args);
  Tensor float_ws = Tensor::empty({std::int64_t(caller.workspace_size(args).float_bytes)}, DType::kU8);
  caller.reset_workspace_buffer(float_ws);
  caller.plan(args);
  EXPECT_EQ(run(own), run(caller));

  BatchMLAPagedAttention mla;
  Tensor tiny = Tensor::empty({256}, DType::kU8);
  EXPECT_NO_THROW(mla.reset_workspace_buffer(tiny));
}

TEST(WorkspaceBuffers, CascadeLevelsShareTheCallersBuffer) {
  MultiLevelCascadeAttention w(2);
  Tensor float_ws = Tensor::empty({4 << 20}, DType::kU8), int_ws = Tensor::empty({1 << 20}, DType::kU8);
  w.reset_workspace_buffer(float_ws, int_ws);
  run_cascade_case(
      {{.first_request = {0}, .lens = {300}}, {.first_request = {0, 1, 2, 3}, .lens = {40, 0, 129, 5}}},
      {1, 1, 1, 1}, {}, 7, &w);
  Tensor tiny = Tensor::empty({256}, DType::kU8);
  w.reset_workspace_buffer({}, tiny);
  expect_error(
      [&] {
        run_cascade_case({{.first_request = {0}, .lens = {300}}, {.first_request = {0, 1}, .lens = {40, 3}}},
                         {1, 1}, {}, 8, &w);
      },
      "int_workspace_buffer", "bytes");
}

}  // namespace
}  // namespace kvinfer::testing
