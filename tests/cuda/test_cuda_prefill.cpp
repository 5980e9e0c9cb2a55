// SPDX-License-Identifier: Apache-2.0
// CUDA prefill (the tensor-core kernels) against the float64 oracle over the
// prefill cases of the attention case list plus a prefill grid: GQA groups 1-8 and
// 16, head dims 64/128/256/512 and 192/128, fp8 KV, every mask, page sizes 1/5/16,
// layouts, strides, window, soft cap, RoPE, ALiBi, split-KV, long requests
// (qo_len 577, kv_len 16k); the Hopper mainloop and the portable 128-row tiles
// side by side; custom mask == causal bitwise; determinism.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>

#include "gpu_test_util.hpp"
#include "testing/attention_case.hpp"
#include "testing/case_name.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

// Every KV dtype, in the order the grids take them by case number.
constexpr DType kKvTypes[] = {DType::kBF16, DType::kF16, DType::kE4M3, DType::kE5M2};

// The prefill grids' layout, cache form, strides and dtypes by case number n: every KV
// dtype; q (and o) fp16 with fp16 KV and one fp8 case in three, else bf16.
void storage_and_dtypes(AttentionCase& c, int n) {
  c.layout = (n / 2) % 2 ? KVLayout::kHND : KVLayout::kNHD;
  c.combined_cache = n % 3 != 1;
  c.strided = n % 5 == 0;
  c.kv_dtype = kKvTypes[n % 4];
  c.q_dtype = c.o_dtype = (c.kv_dtype == DType::kF16 || (is_fp8(c.kv_dtype) && n % 3 == 1)) ? DType::kF16 : DType::kBF16;
}

// The mask by case number n: causal, none, custom (packed in plan() or given packed).
void mask_of_case(AttentionCase& c, int n) {
  c.options.mask_mode = std::array{MaskMode::kCausal, MaskMode::kNone, MaskMode::kCustom}[n % 3];
  c.packed_mask = n % 2 == 0;
}

std::vector<AttentionCase> prefill_cases() {
  std::vector<AttentionCase> cases;
  for (const AttentionCase& c : attention_case_list()) {
    if (c.wrapper != Wrapper::kDecode) cases.push_back(c);
  }
  int n = 0;
  for (int group : {1, 2, 3, 4, 5, 6, 7, 8, 16}) {
    for (int d : {64, 128, 256}) {
      AttentionCase c;
      c.wrapper = n % 2 ? Wrapper::kPagedPrefill : Wrapper::kRaggedPrefill;
      c.num_kv_heads = group == 16 ? 1 : 3 - n % 3;
      c.num_qo_heads = c.num_kv_heads * group;
      c.head_dim_qk = c.head_dim_vo = d;
      const int batch = 1 + n % 4;
      for (int b = 0; b < batch; ++b) {
        const int kv = b == 1 ? 0 : (n * 131 + b * 577) % 700 + (b % 3 == 0 ? 1 : 90);
        c.kv_lens.push_back(kv);
        c.qo_lens.push_back(n % 3 == 0 ? std::max(0, kv - b) : 1 + (n * 37 + b * 11) % 150);
      }
      c.page_size = std::array{1, 5, 16}[n % 3];
      storage_and_dtypes(c, n);
      if (n % 4 == 2) c.o_dtype = other_half_dtype(c.q_dtype);
      vary_options(c, n);
      mask_of_case(c, n);
      if (n % 4 == 1) c.split.fixed_split_size = 128;
      c.seed = 700 + n;
      cases.push_back(c);
      ++n;
    }
  }
  // head_dim 512 (the tensor-core tile's 64-row tiles in column slices; 32-key tiles):
  // groups 1-8, every KV dtype, o != q, every mask, pages, layouts, split and whole.
  n = 0;
  for (int group : {1, 2, 4, 8}) {
    for (int v = 0; v < 3; ++v) {
      AttentionCase c;
      c.wrapper = n % 2 ? Wrapper::kPagedPrefill : Wrapper::kRaggedPrefill;
      c.num_kv_heads = 1 + v % 2;
      c.num_qo_heads = c.num_kv_heads * group;
      c.head_dim_qk = c.head_dim_vo = 512;
      const int batch = 1 + n % 3;
      for (int b = 0; b < batch; ++b) {
        const int kv = b == 1 ? 0 : (n * 131 + b * 577) % 500 + (b % 3 == 0 ? 1 : 40);
        c.kv_lens.push_back(kv);
        c.qo_lens.push_back(n % 3 == 0 ? std::max(0, kv - b) : 1 + (n * 37 + b * 11) % 100);
      }
      c.page_size = std::array{16, 1, 5}[n % 3];
      storage_and_dtypes(c, n);
      if (n % 4 == 1) c.o_dtype = other_half_dtype(c.q_dtype);
      vary_options(c, n);
      mask_of_case(c, n);
      if (n % 4 == 2) c.split.fixed_split_size = 128;
      c.with_lse = n % 2 == 1;
      c.seed = 1700 + n;
      cases.push_back(c);
      ++n;
    }
  }
  // fp16 q with bf16 KV and the reverse (the `full` preset: the tensor-core tile's mma
  // in bf16): head dims 64-512, every mask, RoPE, ALiBi, soft cap, window, pages, split.
  n = 0;
  for (int d : {64, 128, 256, 512}) {
    for (int v = 0; v < 2; ++v) {
      AttentionCase c;
      c.wrapper = n % 2 ? Wrapper::kPagedPrefill : Wrapper::kRaggedPrefill;
      c.num_kv_heads = 1 + n % 2;
      c.num_qo_heads = c.num_kv_heads * (1 + n % 4);
      c.head_dim_qk = c.head_dim_vo = d;
      c.q_dtype = c.o_dtype = v == 0 ? DType::kF16 : DType::kBF16;
      c.kv_dtype = other_half_dtype(c.q_dtype);
      if (n % 3 == 2) c.o_dtype = c.kv_dtype;
      const int batch = 1 + n % 3;
      for (int b = 0; b < batch; ++b) {
        const int kv = (n * 97 + b * 311) % 400 + 30;
        c.kv_lens.push_back(kv);
        c.qo_lens.push_back(n % 2 ? kv : 1 + (n * 13 + b * 7) % 90);
      }
      c.page_size = std::array{16, 5, 1}[n % 3];
      c.layout = n % 2 ? KVLayout::kHND : KVLayout::kNHD;
      vary_options(c, n + 1);
      c.options.mask_mode = std::array{MaskMode::kCausal, MaskMode::kNone, MaskMode::kCustom}[n % 3];
      if (n % 4 == 3) c.split.fixed_split_size = 128;
      c.seed = 1900 + n;
      cases.push_back(c);
      ++n;
    }
  }
  // Head dims no exact instance has (the `full` preset's padded tile): 16 to 496,
  // unequal qk / vo on ragged KV, every dtype pair, RoPE (pairs of the problem's dims),
  // ALiBi, soft cap, masks, pages, split.
  n = 0;
  for (auto [dqk, dvo] : {std::pair{16, 16}, {48, 48}, {80, 80}, {96, 96}, {112, 112}, {144, 144}, {160, 160},
                          {320, 320}, {496, 496}, {128, 64}, {96, 272}, {384, 256}}) {
    AttentionCase c;
    c.wrapper = dqk != dvo || n % 2 ? Wrapper::kRaggedPrefill : Wrapper::kPagedPrefill;
    c.num_kv_heads = 1 + n % 2;
    c.num_qo_heads = c.num_kv_heads * (1 + n % 4);
    c.head_dim_qk = dqk;
    c.head_dim_vo = dvo;
    c.kv_dtype = kKvTypes[n % 4];
    c.q_dtype = c.o_dtype = n % 3 == 0 ? DType::kF16 : DType::kBF16;
    if (n % 5 == 2) c.o_dtype = other_half_dtype(c.q_dtype);
    const int batch = 1 + n % 3;
    for (int b = 0; b < batch; ++b) {
      const int kv = (n * 89 + b * 257) % 300 + 20;
      c.kv_lens.push_back(kv);
      c.qo_lens.push_back(n % 2 ? kv : 1 + (n * 17 + b * 5) % 80);
    }
    c.page_size = std::array{16, 5, 1}[n % 3];
    c.layout = n % 2 ? KVLayout::kHND : KVLayout::kNHD;
    vary_options(c, n);
    c.options.mask_mode = std::array{MaskMode::kCausal, MaskMode::kNone, MaskMode::kCustom}[n % 3];
    if (n % 4 == 3) c.split.fixed_split_size = 64;
    c.seed = 2100 + n;
    cases.push_back(c);
    ++n;
  }
  // DeepSeek-style head dims on ragged KV (qk 192, vo 128).
  for (MaskMode mode : {MaskMode::kNone, MaskMode::kCausal}) {
    AttentionCase c;
    c.name = std::string("qk192_vo128_") + (mode == MaskMode::kCausal ? "causal" : "none");
    c.wrapper = Wrapper::kRaggedPrefill;
    c.num_qo_heads = c.num_kv_heads = 4;
    c.head_dim_qk = 192;
    c.head_dim_vo = 128;
    c.q_dtype = c.kv_dtype = c.o_dtype = DType::kBF16;
    c.qo_lens = {130, 7, 64};
    c.kv_lens = {130, 300, 64};
    c.options.mask_mode = mode;
    c.seed = 31;
    cases.push_back(c);
  }
  // Long requests: qo_len 577 against 16k keys, and a causal 577 x 577; few long
  // requests with short queries split their KV.
  {
    AttentionCase c = bf16_case("long_qo577_kv16k", Wrapper::kPagedPrefill, 2, 1, 64, {577}, {16384});
    c.options.mask_mode = MaskMode::kCausal;
    c.seed = 41;
    cases.push_back(c);
    c.name = "long_causal_577";
    c.wrapper = Wrapper::kRaggedPrefill;
    c.num_qo_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim_qk = c.head_dim_vo = 128;
    c.qo_lens = {577, 33};
    c.kv_lens = {577, 1000};
    c.seed = 42;
    cases.push_back(c);
    c.name = "short_q_long_kv_split";
    c.wrapper = Wrapper::kPagedPrefill;
    c.qo_lens = {5, 3};
    c.kv_lens = {12000, 9000};
    c.seed = 43;
    cases.push_back(c);
    c.name = "speculative_verify_causal";
    c.qo_lens = {4, 4, 4, 4};
    c.kv_lens = {900, 33, 4000, 4};
    c.seed = 44;
    cases.push_back(c);
    // The same on fp8 KV: the decode tile that converts K and V in registers.
    for (DType kv : {DType::kE4M3, DType::kE5M2}) {
      AttentionCase f = c;
      f.name = std::string("speculative_verify_causal_") + (kv == DType::kE4M3 ? "e4m3" : "e5m2_d64_window");
      f.kv_dtype = kv;
      f.k_scale = 0.5f;
      f.v_scale = 1.5f;
      if (kv == DType::kE5M2) {
        f.q_dtype = f.o_dtype = DType::kF16;
        f.head_dim_qk = f.head_dim_vo = 64;
        f.options.window_left = 50;
        f.split.fixed_split_size = 256;
      }
      f.seed = 46 + int(kv == DType::kE5M2);
      cases.push_back(f);
    }
    c.name = "fully_masked_rows_causal";
    c.qo_lens = {40, 9};
    c.kv_lens = {25, 3};
    c.seed = 45;
    cases.push_back(c);
  }
  // The Hopper mainloop (options.backend fa3) and, on the same shapes, the portable
  // kernel's 128-row tiles, which the automatic choice no longer takes on sm_90:
  // GQA groups, head dims, fp16/bf16, masks none/causal and window, page sizes,
  // layouts, strides, split-KV, rows that end mid-tile, empty requests.
  n = 0;
  for (PrefillBackend backend : {PrefillBackend::kHopper, PrefillBackend::kPortable}) {
    for (int group : {1, 2, 4, 8}) {
      for (int d : {64, 128, 256}) {
        AttentionCase c;
        c.options.backend = backend;
        c.wrapper = n % 2 ? Wrapper::kPagedPrefill : Wrapper::kRaggedPrefill;
        c.num_kv_heads = 1 + n % 2;
        c.num_qo_heads = c.num_kv_heads * group;
        c.head_dim_qk = c.head_dim_vo = d;
        const int batch = 1 + n % 3;
        for (int b = 0; b < batch; ++b) {
          const int qo = b == 2 ? 0 : 70 + (n * 53 + b * 97) % 230;
          c.qo_lens.push_back(qo);
          c.kv_lens.push_back(qo + (n * 71 + b * 13) % 400);
        }
        c.page_size = std::array{1, 5, 16}[n % 3];
        c.layout = (n / 2) % 2 ? KVLayout::kHND : KVLayout::kNHD;
        c.combined_cache = n % 3 != 1;
        c.strided = n % 5 == 0;
        c.q_dtype = c.kv_dtype = c.o_dtype = n % 4 == 1 ? DType::kF16 : DType::kBF16;
        c.with_lse = n % 4 != 3;
        c.options.mask_mode = n % 3 == 1 ? MaskMode::kNone : MaskMode::kCausal;
        if (n % 6 == 4) c.options.window_left = 90;
        if (n % 4 == 2) c.split.fixed_split_size = 128;
        c.seed = 900 + n;
        cases.push_back(c);
        ++n;
      }
    }
  }
  name_cases(cases);  // the unnamed grid cases by what they are
  return cases;
}

// Whether cuda:0 runs the Hopper (sm_90) kernels.
bool hopper_gpu() {
  int major = 0, minor = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess && major == 9 &&
         minor == 0;
}

class CudaPrefillCase : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CudaPrefillCase, MatchesOracle) {
  KVINFER_SKIP_WITHOUT_GPU();
  const AttentionCase& c = GetParam();
  KVINFER_SKIP_WITHOUT_INSTANCES(c);
  if (c.options.backend == PrefillBackend::kHopper && !hopper_gpu()) GTEST_SKIP() << "not an sm_90 device";
  const CaseReport r = run_attention_case(c, Device::cuda(0));
  EXPECT_TRUE(r.ok()) << c.describe() << "\n" << r.summary();
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPrefillCase, ::testing::ValuesIn(prefill_cases()),
                         [](const auto& info) { return info.param.name; });

std::vector<std::uint16_t> bits(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  std::vector<std::uint16_t> b(static_cast<std::size_t>(h.numel()));
  std::memcpy(b.data(), h.data(), h.nbytes());
  return b;
}

// The custom mask of the causal triangle runs the general kernel; it must give
// bitwise the portable causal kernel's result (same key tiles, same arithmetic per
// row; the Hopper mainloop accumulates in another order, so it is pinned off).
TEST(CudaPrefill, CustomMaskOfTheCausalTriangleEqualsCausal) {
  KVINFER_SKIP_WITHOUT_GPU();
  Rng rng(12);
  const std::vector<std::int32_t> qo_indptr{0, 17, 150}, kv_indptr{0, 54, 251};
  const std::int64_t hq = 4, hk = 4, d = 128;
  const Device gpu = Device::cuda(0);
  Tensor q = random_bf16({150, hq, d}, rng).to(gpu), k = random_bf16({251, hk, d}, rng).to(gpu),
         v = random_bf16({251, hk, d}, rng).to(gpu);
  std::vector<std::uint8_t> mask;
  for (int r = 0; r < 2; ++r) {
    const int qo = qo_indptr[r + 1] - qo_indptr[r], kv = kv_indptr[r + 1] - kv_indptr[r];
    for (int i = 0; i < qo; ++i)
      for (int j = 0; j < kv; ++j) mask.push_back(j <= i + kv - qo ? 1 : 0);
  }
  Tensor mask_dev = Tensor::empty({std::int64_t(mask.size())}, DType::kBool, gpu);
  copy(mask_dev, TensorView(mask.data(), DType::kBool, {std::int64_t(mask.size())}));
  const Tensor qi = int32_tensor(qo_indptr), ki = int32_tensor(kv_indptr);
  Tensor out_causal = Tensor::empty({150, hq, d}, DType::kBF16, gpu), out_custom = Tensor::empty({150, hq, d}, DType::kBF16, gpu);
  Tensor lse_causal = Tensor::empty({150, hq}, DType::kF32, gpu), lse_custom = Tensor::empty({150, hq}, DType::kF32, gpu);
  BatchPrefillWithRaggedKVCache w(gpu);
  w.plan({.qo_indptr = qi, .kv_indptr = ki, .num_qo_heads = hq, .num_kv_heads = hk, .head_dim_qk = d,
          .options = {.mask_mode = MaskMode::kCausal, .backend = PrefillBackend::kPortable}});
  w.run(q, k, v, out_causal, {.lse = lse_causal});
  w.plan({.qo_indptr = qi, .kv_indptr = ki, .num_qo_heads = hq, .num_kv_heads = hk, .head_dim_qk = d,
          .options = {.mask_mode = MaskMode::kCustom}, .custom_mask = mask_dev});
  w.run(q, k, v, out_custom, {.lse = lse_custom});
  EXPECT_EQ(bits(out_causal), bits(out_custom));
  const Tensor a = lse_causal.to(Device::cpu()), b = lse_custom.to(Device::cpu());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.nbytes()));
}

// With a fixed split size, GPU prefill repeats bitwise and agrees with the CPU backend.
TEST(CudaPrefill, DeterministicAndCloseToCpuWithTheSameChunks) {
  KVINFER_SKIP_WITHOUT_GPU();
  AttentionCase c = fixed_split_case(Wrapper::kPagedPrefill, {100, 7, 300});
  c.options.mask_mode = MaskMode::kCausal;
  expect_deterministic_and_close_to_cpu(c, 3e-2);  // bf16 rounding of P and O apart
}

// options.backend fa3 where the Hopper mainloop cannot run is a plan-time error
// naming the option (RoPE here; on a device other than sm_90, any problem).
// Position offsets run on the CPU backend: on a GPU, a non-zero offset is a named
// error at plan(), an all-zero array plans as none.
TEST(CudaPrefill, NonZeroPositionOffsetsAreAnErrorOnTheGpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  const Tensor qi = int32_tensor({0, 3, 7}), ki = int32_tensor({0, 9, 12});
  BatchPrefillWithRaggedKVCache w(Device::cuda(0));
  const auto plan = [&](const Tensor& offsets) {
    w.plan({.qo_indptr = qi, .kv_indptr = ki, .num_qo_heads = 4, .num_kv_heads = 4, .head_dim_qk = 128,
            .options = {.mask_mode = MaskMode::kCausal}, .position_offsets = offsets});
  };
  expect_error([&] { plan(int32_tensor({0, -2})); }, "position_offsets[1]");
  plan(int32_tensor({0, 0}));
}

TEST(CudaPrefill, HopperBackendWhereItCannotRunIsAnError) {
  KVINFER_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  const std::vector<std::int32_t> qo_indptr{0, 200}, kv_indptr{0, 300};
  const Tensor qi = int32_tensor(qo_indptr), ki = int32_tensor(kv_indptr);
  BatchPrefillWithRaggedKVCache w(gpu);
  try {
    w.plan({.qo_indptr = qi, .kv_indptr = ki, .num_qo_heads = 4, .num_kv_heads = 4, .head_dim_qk = 128,
            .options = {.pos_encoding = PosEncoding::kRopeLlama, .backend = PrefillBackend::kHopper}});
    FAIL() << "plan accepted backend fa3 with RoPE";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("options.backend"), std::string::npos) << e.what();
    // The selector's error, under the name of the wrapper the caller planned with.
    EXPECT_EQ(e.op(), "BatchPrefillWithRaggedKVCache") << e.what();
  }
  // single_prefill plans with the same selector: its name, not the ragged wrapper's.
  const Tensor q = Tensor::zeros({200, 4, 128}, DType::kBF16, gpu), kv = Tensor::zeros({300, 4, 128}, DType::kBF16, gpu);
  const Tensor out = Tensor::zeros({200, 4, 128}, DType::kBF16, gpu);
  expect_error_of("single_prefill",
                  [&] {
                    single_prefill(q, kv, kv, out,
                                   {.options = {.pos_encoding = PosEncoding::kRopeLlama,
                                                .backend = PrefillBackend::kHopper}});
                  },
                  "options.backend");
}

}  // namespace
}  // namespace kvinfer::testing
