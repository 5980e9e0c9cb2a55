// SPDX-License-Identifier: Apache-2.0
// CUDA decode against the float64 oracle (and bitwise batch invariance with a
// fixed split size), over the decode cases of the attention case list plus a
// decode grid: GQA groups 1-8 and 16, head dims 64/128/256, fp8 KV, layouts,
// strides, window, soft cap, RoPE, ALiBi, split-KV; and a head_dim 512 grid.
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "testing/attention_case.hpp"
#include "testing/case_name.hpp"

namespace kvinfer::testing {
namespace {

// Every KV dtype, in the order the grids take them by case number.
constexpr DType kKvTypes[] = {DType::kBF16, DType::kF16, DType::kE4M3, DType::kE5M2};

// The decode grids' layout, cache form, strides and dtypes by case number n: every KV
// dtype, q (and o) of the KV's type where it is 16-bit.
void storage_and_dtypes(AttentionCase& c, int n) {
  c.layout = n % 2 ? KVLayout::kHND : KVLayout::kNHD;
  c.combined_cache = n % 3 != 0;
  c.strided = n % 5 == 0;
  c.kv_dtype = kKvTypes[n % 4];
  c.q_dtype = c.o_dtype = (c.kv_dtype == DType::kF16 || n % 3 == 1) ? DType::kF16 : DType::kBF16;
  if (c.kv_dtype == DType::kF16 || c.kv_dtype == DType::kBF16) c.q_dtype = c.o_dtype = c.kv_dtype;
}

std::vector<AttentionCase> decode_cases() {
  std::vector<AttentionCase> cases;
  for (const AttentionCase& c : attention_case_list()) {
    if (c.wrapper == Wrapper::kDecode) cases.push_back(c);
  }
  int n = 0;
  for (int group : {1, 2, 3, 4, 5, 6, 7, 8, 16}) {
    for (int d : {64, 128, 256}) {
      AttentionCase c;
      c.wrapper = Wrapper::kDecode;
      c.num_kv_heads = group == 16 ? 2 : 4 - n % 3;
      c.num_qo_heads = c.num_kv_heads * group;
      c.head_dim_qk = c.head_dim_vo = d;
      const int batch = 1 + n % 7;
      for (int b = 0; b < batch; ++b) {
        c.qo_lens.push_back(1);
        c.kv_lens.push_back(b == 1 ? 0 : (n * 131 + b * 977) % 3000 + (b % 3 == 0 ? 1 : 17));
      }
      c.page_size = std::array{1, 5, 16, 64}[n % 4];
      storage_and_dtypes(c, n);
      if (n % 4 == 2) c.o_dtype = other_half_dtype(c.q_dtype);
      vary_options(c, n);
      if (n % 4 == 1) c.split.fixed_split_size = 256;
      c.seed = 500 + n;
      cases.push_back(c);
      ++n;
    }
  }
  // head_dim 512 (the tensor-core tile in column slices: its 16-row tile up to group
  // 16, its 64-row tile above and for the general logits): groups 1-32, every KV
  // dtype, o != q, pages, layouts, split and whole, RoPE, ALiBi, soft cap, window.
  n = 0;
  for (int group : {1, 2, 4, 8, 16, 32}) {
    for (int v = 0; v < 2; ++v) {
      AttentionCase c;
      c.wrapper = Wrapper::kDecode;
      c.num_kv_heads = group >= 16 ? 1 : 2 + v;
      c.num_qo_heads = c.num_kv_heads * group;
      c.head_dim_qk = c.head_dim_vo = 512;
      const int batch = 1 + (n * 3) % 5;
      for (int b = 0; b < batch; ++b) {
        c.qo_lens.push_back(1);
        c.kv_lens.push_back(b == 1 ? 0 : (n * 211 + b * 977) % 2500 + (b % 3 == 0 ? 1 : 17));
      }
      c.page_size = std::array{16, 5, 1, 64}[n % 4];
      storage_and_dtypes(c, n);
      if (n % 4 == 3) c.o_dtype = other_half_dtype(c.q_dtype);
      vary_options(c, n);
      if (n % 3 == 2) c.split.fixed_split_size = 256;
      c.with_lse = n % 2 == 0;
      c.seed = 1500 + n;
      cases.push_back(c);
      ++n;
    }
  }
  // fp16 q with bf16 KV and the reverse (the `full` preset): groups 1 (the CUDA cores)
  // and 4 (the 16-row tile, its mma in bf16), head dims 64-512, RoPE, soft cap.
  n = 0;
  for (int d : {64, 128, 256, 512}) {
    for (int group : {1, 4}) {
      AttentionCase c;
      c.wrapper = Wrapper::kDecode;
      c.num_kv_heads = 2;
      c.num_qo_heads = 2 * group;
      c.head_dim_qk = c.head_dim_vo = d;
      c.q_dtype = c.o_dtype = n % 2 ? DType::kBF16 : DType::kF16;
      c.kv_dtype = other_half_dtype(c.q_dtype);
      c.qo_lens.assign(3, 1);
      c.kv_lens = {1 + n * 211 % 1500, 0, 700};
      c.page_size = n % 3 == 0 ? 5 : 16;
      vary_options(c, n);
      c.seed = 1600 + n;
      cases.push_back(c);
      ++n;
    }
  }
  // Head dims no exact instance has (the `full` preset's padded tile): groups 1-16,
  // every KV dtype, RoPE, ALiBi, soft cap, window, pages, split.
  n = 0;
  for (int d : {16, 32, 80, 96, 112, 160, 192, 224, 288, 400, 448, 496}) {
    AttentionCase c;
    c.wrapper = Wrapper::kDecode;
    const int group = std::array{1, 4, 8, 16, 2, 5}[n % 6];
    c.num_kv_heads = group == 16 ? 1 : 2;
    c.num_qo_heads = c.num_kv_heads * group;
    c.head_dim_qk = c.head_dim_vo = d;
    c.kv_dtype = kKvTypes[n % 4];
    c.q_dtype = c.o_dtype = (c.kv_dtype == DType::kF16 || n % 3 == 1) ? DType::kF16 : DType::kBF16;
    if (n % 4 == 1) c.o_dtype = other_half_dtype(c.q_dtype);
    c.qo_lens.assign(3, 1);
    c.kv_lens = {1 + n * 173 % 1800, 0, 1 + n * 71 % 900};
    c.page_size = std::array{16, 5, 1, 64}[n % 4];
    c.layout = n % 2 ? KVLayout::kHND : KVLayout::kNHD;
    vary_options(c, n);
    if (n % 3 == 2) c.split.fixed_split_size = 256;
    c.seed = 2300 + n;
    cases.push_back(c);
    ++n;
  }
  const AttentionCase longest = bf16_case("one_long_request_auto_split", Wrapper::kDecode, 32, 8, 128, {1}, {20000});
  cases.push_back(longest);
  AttentionCase skewed = longest;
  skewed.name = "skewed_lengths";
  skewed.qo_lens.assign(8, 1);
  skewed.kv_lens = {8000, 1, 1, 1, 1, 1, 1, 1};
  cases.push_back(skewed);
  // fp8 KV on the decode tile that converts K and V in registers: the benchmark's
  // shape (group 4, head_dim 128, page 16) split and whole, and e5m2 with fp16 q,
  // head_dim 64, HND pages of 5 and a window.
  for (int v = 0; v < 3; ++v) {
    AttentionCase c = longest;
    c.name = std::array{"fp8_e4m3_group4_split", "fp8_e4m3_group4_whole", "fp8_e5m2_d64_hnd_window"}[v];
    c.kv_dtype = v < 2 ? DType::kE4M3 : DType::kE5M2;
    c.k_scale = 0.75f;
    c.v_scale = 1.25f;
    c.qo_lens.assign(5, 1);
    c.kv_lens = {3001, 16, 0, 777, 1};
    c.page_size = v < 2 ? 16 : 5;
    if (v == 0) c.split.fixed_split_size = 128;
    if (v == 2) {
      c.q_dtype = c.o_dtype = DType::kF16;
      c.head_dim_qk = c.head_dim_vo = 64;
      c.num_qo_heads = 12;
      c.num_kv_heads = 2;
      c.layout = KVLayout::kHND;
      c.options.window_left = 300;
      c.with_lse = true;
    }
    c.seed = 61 + v;
    cases.push_back(c);
  }
  // Requests split in at most 4 chunks are merged by a warp per (row, head) rather than
  // a CTA (merge_partials.cu): head dims 64 / 128 / 256, with an empty request, a
  // one-token one and LSE.
  for (int d : {64, 128, 256}) {
    AttentionCase c;
    c.name = "warp_merge_d" + std::to_string(d);
    c.wrapper = Wrapper::kDecode;
    c.num_kv_heads = 2;
    c.num_qo_heads = d == 64 ? 2 : d == 128 ? 8 : 6;
    c.head_dim_qk = c.head_dim_vo = d;
    c.q_dtype = c.kv_dtype = c.o_dtype = d == 256 ? DType::kF16 : DType::kBF16;
    c.qo_lens.assign(6, 1);
    c.kv_lens = {1500, 0, 700, 1, 2048, 333};  // 3, 0, 2, 1, 4 and 1 chunks of 512
    c.split.fixed_split_size = 512;
    c.with_lse = true;
    c.seed = 71 + d;
    cases.push_back(c);
  }
  // Item warps (the decode tile's CTA runs an item on several warps and merges them):
  // similar lengths on an H200 (132 warp slots per KV head) give 16 requests of ~3k
  // keys 8 warps each and no split; the shortest request leaves warps without keys,
  // the empty one every warp. One 20k request at head_dim 64 (HND, pages of 5, fp16)
  // gets 8 warps per item and chunks merged after; with a window, and with several
  // query tokens per request under the causal mask (the decode tile of a speculative
  // verification step, 4 tokens of a group of 4). With 16-bit KV and one token per
  // request the item warps are the key-row tile's (decode_tile_kq.cuh), in the
  // verification step the 16-row tile's. The fp8 tile's item warps: e4m3 over
  // the 16 requests, e5m2 with fp16 q at head_dim 64 over the 20k request.
  for (int v = 0; v < 6; ++v) {
    AttentionCase c = longest;
    c.name = std::array{"item_warps_whole",         "item_warps_split_d64_hnd", "item_warps_window",
                        "item_warps_causal_verify", "item_warps_fp8_whole",     "item_warps_fp8_split_d64"}[v];
    c.with_lse = true;
    c.seed = 81 + v;
    if (v == 0 || v == 3 || v == 4) {
      c.kv_lens = {3000, 2990, 2500, 100, 2800, 0, 3000, 2047, 2999, 2600, 3000, 1900, 2950, 2700, 3000, 2222};
    }
    if (v >= 4) {
      c.kv_dtype = v == 4 ? DType::kE4M3 : DType::kE5M2;
      c.k_scale = 0.75f;
      c.v_scale = 1.25f;
    }
    if (v == 1 || v == 5) {
      c.head_dim_qk = c.head_dim_vo = 64;
      c.q_dtype = c.o_dtype = DType::kF16;
      if (v == 1) c.kv_dtype = DType::kF16;
      c.layout = KVLayout::kHND;
      c.page_size = 5;
      c.combined_cache = false;
    }
    if (v == 2) {
      c.kv_lens = {20000, 19000};
      c.options.window_left = 5000;
    }
    if (v == 3) {
      c.wrapper = Wrapper::kPagedPrefill;
      c.options.mask_mode = MaskMode::kCausal;
      c.qo_lens.assign(c.kv_lens.size(), 4);
      c.kv_lens[5] = 4;  // every query row sees a key of its own
    } else {
      c.qo_lens.assign(c.kv_lens.size(), 1);
    }
    cases.push_back(c);
  }
  // The key-row decode tile (decode_tile_kq.cuh: head_dim 256, groups 2 and more,
  // 16-bit KV): group 4 with a request ending mid-tile, an empty one and a one-token one;
  // group 8 over one long request split automatically (fp16); group 16 (two 8-row items
  // per token) on HND pages of 5 with a window; one query token per request of a ragged
  // (contiguous) cache, as single_decode runs it.
  for (int v = 0; v < 4; ++v) {
    AttentionCase c = longest;
    c.name = std::array{"kq_d256_group4", "kq_d256_group8_long_split", "kq_d256_group16_hnd_window",
                        "kq_d256_ragged_one_token"}[v];
    c.head_dim_qk = c.head_dim_vo = 256;
    c.with_lse = true;
    c.seed = 101 + v;
    if (v == 0) {
      c.qo_lens.assign(5, 1);
      c.kv_lens = {3001, 16, 0, 777, 1};
    } else if (v == 1) {
      c.q_dtype = c.kv_dtype = c.o_dtype = DType::kF16;
      c.num_qo_heads = 16;
      c.num_kv_heads = 2;
    } else if (v == 2) {
      c.num_qo_heads = 32;
      c.num_kv_heads = 2;
      c.qo_lens.assign(2, 1);
      c.kv_lens = {1500, 33};
      c.layout = KVLayout::kHND;
      c.page_size = 5;
      c.combined_cache = false;
      c.options.window_left = 400;
    } else {
      c.wrapper = Wrapper::kRaggedPrefill;
      c.qo_lens.assign(3, 1);
      c.kv_lens = {700, 1, 2500};
    }
    cases.push_back(c);
  }
  // The copies' page lookups (PagesAhead): unsplit requests of hundreds of 16-key tiles
  // on pages of 16 and 64 keys take their pages a window of 32 tiles ahead (a request of
  // 5000 keys crosses nine windows and ends mid-tile; one of 1056 ends where a window
  // does), 16-bit and fp8; with a window of keys starting mid-page, the pages of
  // each tile's rows (row mode).
  for (int v = 0; v < 4; ++v) {
    AttentionCase c = longest;
    c.name = std::array{"page_window_16", "page_window_16_fp8", "page_rows_window_64", "page_window_64_fp8"}[v];
    c.seed = 91 + v;
    c.qo_lens.assign(4, 1);
    c.kv_lens = {5000, 1, 1056, 527};
    c.page_size = v < 2 ? 16 : 64;
    c.split.disable_split_kv = true;
    if (v % 2 == 1) c.kv_dtype = DType::kE4M3;
    if (v == 2) c.options.window_left = 1000;
    cases.push_back(c);
  }
  name_cases(cases);  // the unnamed grid cases by what they are
  return cases;
}

class CudaDecodeCase : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CudaDecodeCase, MatchesOracle) {
  KVINFER_SKIP_WITHOUT_GPU();
  const AttentionCase& c = GetParam();
  KVINFER_SKIP_WITHOUT_INSTANCES(c);
  const CaseReport r = run_attention_case(c, Device::cuda(0));
  EXPECT_TRUE(r.ok()) << c.describe() << "\n" << r.summary();
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaDecodeCase, ::testing::ValuesIn(decode_cases()),
                         [](const auto& info) { return info.param.name; });

// With a fixed split size both backends attend the same chunks; GPU runs repeat bitwise.
TEST(CudaDecode, DeterministicAndCloseToCpuWithTheSameChunks) {
  KVINFER_SKIP_WITHOUT_GPU();
  expect_deterministic_and_close_to_cpu(fixed_split_case(Wrapper::kDecode, {1, 1, 1}), 2e-2);  // bf16 rounding apart
}

}  // namespace
}  // namespace kvinfer::testing
