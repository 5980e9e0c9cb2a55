// SPDX-License-Identifier: Apache-2.0
// The CUDA attention kernel selector's rules, run on the CPU with the H200's
// capabilities and the `default` instance preset as plain values.
#include <gtest/gtest.h>

#include "plan/attention_selector.hpp"
#include "testing/attention_case.hpp"
#include "testing/expect_error.hpp"

namespace kvinfer::detail {
namespace {

using testing::expect_error;

// The `default` preset of cmake/KvinferInstances.cmake.
AttentionKernelCaps default_preset(bool hopper) {
  AttentionKernelCaps c;
  c.hopper = hopper;
  const auto add = [&](KernelFamily f, DType q, DType kv, int dqk, int dvo) {
    c.instances.push_back({f, q, kv, dqk, dvo});
  };
  for (DType q : {DType::kF16, DType::kBF16}) {
    for (DType kv : {q, DType::kE4M3, DType::kE5M2}) {
      for (int d : {64, 128, 256}) {
        add(KernelFamily::kCudaCoreDecode, q, kv, d, d);
        add(KernelFamily::kTensorCoreTile, q, kv, d, d);
        if (kv == q) {
          add(KernelFamily::kKeyRowTile, q, kv, d, d);
          add(KernelFamily::kWgmmaPrefill, q, kv, d, d);
          add(KernelFamily::kWsPrefill, q, kv, d, d);
        } else if (d <= 128) {
          add(KernelFamily::kFp8DecodeTile, q, kv, d, d);
        }
      }
    }
    add(KernelFamily::kTensorCoreTile, q, q, 192, 128);
    for (DType kv : {q, DType::kE4M3, DType::kE5M2}) add(KernelFamily::kTensorCoreTile, q, kv, 512, 512);
  }
  return c;
}

AttentionProblem problem(DType q, DType kv, std::int64_t group, std::int64_t d, std::int32_t max_qo_len) {
  AttentionProblem pr;
  pr.num_kv_heads = 8;
  pr.num_qo_heads = 8 * group;
  pr.head_dim_qk = pr.head_dim_vo = d;
  pr.q_dtype = pr.o_dtype = q;
  pr.kv_dtype = kv;
  pr.max_qo_len = max_qo_len;
  return pr;
}

void expect_key(const KernelKey& k, KernelFamily family, int rows, const AttentionKernelCaps& caps,
                const AttentionProblem& pr) {
  EXPECT_EQ(k.family, family);
  EXPECT_EQ(k.launch_rows, rows);
  const auto& list = caps.instances;
  ASSERT_GE(k.instance, 0);
  ASSERT_LT(std::size_t(k.instance), list.size());
  EXPECT_EQ(list[std::size_t(k.instance)].family, family);
  EXPECT_EQ(list[std::size_t(k.instance)].q, pr.q_dtype);
  EXPECT_EQ(list[std::size_t(k.instance)].kv, pr.kv_dtype);
  EXPECT_EQ(list[std::size_t(k.instance)].head_dim_qk, pr.head_dim_qk);
}

const AttentionKernelCaps kH200 = default_preset(true);

// The `full` preset: `default`, mixed fp16/bf16 on the CUDA cores and the tensor-core
// tile, and the padded tile at every dtype pair.
AttentionKernelCaps full_preset() {
  AttentionKernelCaps c = default_preset(true);
  c.preset = "full";
  for (DType q : {DType::kF16, DType::kBF16}) {
    const DType other = testing::other_half_dtype(q);
    for (int d : {64, 128, 256, 512}) {
      if (d < 512) c.instances.push_back({KernelFamily::kCudaCoreDecode, q, other, d, d});
      c.instances.push_back({KernelFamily::kTensorCoreTile, q, other, d, d});
      for (DType kv : {DType::kF16, DType::kBF16, DType::kE4M3, DType::kE5M2})
        c.instances.push_back({KernelFamily::kPaddedTile, q, kv, d, d});
    }
  }
  return c;
}
const AttentionKernelCaps kFull = full_preset();

TEST(AttentionSelector, Decode16BitAtHeadDim128PlansAsTheTileAndRunsTheKeyRowTile) {
  const AttentionProblem pr = problem(DType::kBF16, DType::kBF16, 4, 128, 1);
  const AttentionSelection s = select_attention_kernel(pr, kH200);
  expect_key(s.plan, KernelFamily::kTensorCoreTile, 16, kH200, pr);
  expect_key(s.run, KernelFamily::kKeyRowTile, 4, kH200, pr);
}

TEST(AttentionSelector, Decode16BitAtHeadDims64And256TakesTheKeyRowTile) {
  for (int d : {64, 256}) {
    const AttentionProblem pr = problem(DType::kF16, DType::kF16, 4, d, 1);
    const AttentionSelection s = select_attention_kernel(pr, kH200);
    expect_key(s.plan, KernelFamily::kKeyRowTile, 4, kH200, pr);
    EXPECT_EQ(s.run.family, s.plan.family);
    EXPECT_EQ(s.run.launch_rows, s.plan.launch_rows);
    // RoPE, which the key-row tile does not apply: the 16-row tile where its
    // accumulators fit (head_dim 64), else the CUDA cores, which plan and run it.
    AttentionProblem rope = pr;
    rope.pos_encoding = PosEncoding::kRopeLlama;
    const AttentionSelection r = select_attention_kernel(rope, kH200);
    const KernelFamily family = d == 64 ? KernelFamily::kTensorCoreTile : KernelFamily::kCudaCoreDecode;
    expect_key(r.plan, family, d == 64 ? 16 : 4, kH200, rope);
    expect_key(r.run, family, d == 64 ? 16 : 4, kH200, rope);
  }
}

TEST(AttentionSelector, Fp8DecodeTakesTheFp8DecodeTile) {
  const AttentionProblem pr = problem(DType::kBF16, DType::kE4M3, 4, 128, 1);
  const AttentionSelection s = select_attention_kernel(pr, kH200);
  expect_key(s.plan, KernelFamily::kFp8DecodeTile, 16, kH200, pr);
  expect_key(s.run, KernelFamily::kFp8DecodeTile, 16, kH200, pr);
  // Where no fp8 decode tile is compiled (head_dim 256 has none), the 16-row tile's
  // accumulators do not fit either: the CUDA cores.
  const AttentionProblem d256 = problem(DType::kBF16, DType::kE4M3, 4, 256, 1);
  expect_key(select_attention_kernel(d256, kH200).run, KernelFamily::kCudaCoreDecode, 4, kH200, d256);
  // RoPE cannot rotate K converted in registers: the CUDA cores.
  AttentionProblem rope = pr;
  rope.pos_encoding = PosEncoding::kRopeLlama;
  expect_key(select_attention_kernel(rope, kH200).run, KernelFamily::kCudaCoreDecode, 4, kH200, rope);
}

TEST(AttentionSelector, GroupOneAndGeneralLogitsDecodeOnTheCudaCores) {
  const AttentionProblem one = problem(DType::kBF16, DType::kBF16, 1, 128, 1);
  expect_key(select_attention_kernel(one, kH200).run, KernelFamily::kCudaCoreDecode, 1, kH200, one);
  AttentionProblem cap = problem(DType::kBF16, DType::kBF16, 8, 128, 1);
  cap.logits_soft_cap = 30.0f;
  expect_key(select_attention_kernel(cap, kH200).run, KernelFamily::kCudaCoreDecode, 8, kH200, cap);
}

// head_dim 512 has only the tensor-core tile (in column slices): decode of every group
// up to 16 and every KV dtype on its 16-row tile, RoPE included; larger groups, the
// general logits and prefill on 64-row tiles, never the 128-row tile.
TEST(AttentionSelector, HeadDim512TakesTheTensorCoreTile) {
  for (DType kv : {DType::kBF16, DType::kE4M3}) {
    for (const std::int64_t group : {1, 2, 8, 16}) {
      AttentionProblem pr = problem(DType::kBF16, kv, group, 512, 1);
      expect_key(select_attention_kernel(pr, kH200).run, KernelFamily::kTensorCoreTile, 16, kH200, pr);
      pr.pos_encoding = PosEncoding::kRopeLlama;
      expect_key(select_attention_kernel(pr, kH200).run, KernelFamily::kTensorCoreTile, kv == DType::kBF16 ? 16 : 64,
                 kH200, pr);
    }
  }
  AttentionProblem wide_group = problem(DType::kF16, DType::kF16, 32, 512, 1);
  expect_key(select_attention_kernel(wide_group, kH200).run, KernelFamily::kTensorCoreTile, 64, kH200, wide_group);
  AttentionProblem cap = problem(DType::kF16, DType::kF16, 4, 512, 1);
  cap.logits_soft_cap = 30.0f;
  const KernelKey general = select_attention_kernel(cap, kH200).run;
  expect_key(general, KernelFamily::kTensorCoreTile, 64, kH200, cap);
  EXPECT_EQ(general.variant, KernelVariant::kGeneralLogits);
  for (const std::int32_t qo : {7, 4096}) {
    AttentionProblem pr = problem(DType::kBF16, DType::kBF16, 4, 512, qo);
    pr.storage = qo == 7 ? KVStorage::kPaged : KVStorage::kRagged;
    pr.page_size = 16;
    expect_key(select_attention_kernel(pr, kH200).run, KernelFamily::kTensorCoreTile, 64, kH200, pr);
    pr.length_free_kernel = true;
    expect_key(select_attention_kernel(pr, kH200).run, KernelFamily::kTensorCoreTile, 64, kH200, pr);
  }
  // fa3 has no head_dim 512.
  AttentionProblem fa3 = problem(DType::kBF16, DType::kBF16, 1, 512, 4096);
  fa3.backend = PrefillBackend::kHopper;
  expect_error([&] { (void)select_attention_kernel(fa3, kH200); }, "options.backend", "64/128/256");
}

// Head dims without an exact instance run on the padded tile of the smallest instance
// that holds both, with that head dim's tiles; exact instances keep their families.
TEST(AttentionSelector, OtherHeadDimsTakeThePaddedTileInTheFullPreset) {
  const auto padded_dim = [](const KernelKey& k) { return kFull.instances[std::size_t(k.instance)].head_dim_qk; };
  AttentionProblem d96 = problem(DType::kBF16, DType::kBF16, 4, 96, 1);
  KernelKey k = select_attention_kernel(d96, kFull).run;
  EXPECT_EQ(k.family, KernelFamily::kPaddedTile);
  EXPECT_EQ(padded_dim(k), 128);
  EXPECT_EQ(k.launch_rows, 16);
  AttentionProblem d48 = problem(DType::kF16, DType::kE4M3, 1, 48, 4096);
  k = select_attention_kernel(d48, kFull).run;
  EXPECT_EQ(k.family, KernelFamily::kPaddedTile);
  EXPECT_EQ(padded_dim(k), 64);
  EXPECT_EQ(k.launch_rows, 128);
  AttentionProblem d320 = problem(DType::kBF16, DType::kF16, 2, 320, 4096);
  d320.logits_soft_cap = 30.0f;
  k = select_attention_kernel(d320, kFull).run;
  EXPECT_EQ(k.family, KernelFamily::kPaddedTile);
  EXPECT_EQ(padded_dim(k), 512);
  EXPECT_EQ(k.launch_rows, 64);
  EXPECT_EQ(k.variant, KernelVariant::kGeneralLogits);
  AttentionProblem unequal = problem(DType::kBF16, DType::kBF16, 1, 128, 300);
  unequal.head_dim_vo = 272;
  k = select_attention_kernel(unequal, kFull).run;
  EXPECT_EQ(k.family, KernelFamily::kPaddedTile);
  EXPECT_EQ(padded_dim(k), 512);
  // Exact instances first: 192 / 128 and head_dim 128 keep their kernels.
  AttentionProblem ds = problem(DType::kBF16, DType::kBF16, 1, 192, 300);
  ds.head_dim_vo = 128;
  EXPECT_EQ(select_attention_kernel(ds, kFull).run.family, KernelFamily::kTensorCoreTile);
  EXPECT_EQ(select_attention_kernel(problem(DType::kBF16, DType::kBF16, 4, 128, 1), kFull).run.family,
            KernelFamily::kKeyRowTile);
  // fa3 has none; the default preset names the full one.
  d96.backend = PrefillBackend::kHopper;
  expect_error([&] { (void)select_attention_kernel(d96, kFull); }, "options.backend", "head_dim 96");
  expect_error([&] { (void)select_attention_kernel(d48, kH200); }, "kernel", "the 'full' preset has one");
}

TEST(AttentionSelector, PrefillTilesByLengthAndDevice) {
  const AttentionProblem pr = problem(DType::kBF16, DType::kBF16, 1, 128, 4096);
  expect_key(select_attention_kernel(pr, kH200).run, KernelFamily::kWsPrefill, 128, kH200, pr);
  // Paged KV of any page size takes the warp-specialised kernel where its paged gathers
  // are enabled, else the wgmma mainloop.
  for (const std::int64_t page : {1, 2, 4, 8, 16, 64, 256, 512, 24}) {
    AttentionProblem paged = pr;
    paged.storage = KVStorage::kPaged;
    paged.page_size = page;
    for (const bool ws : {false, true}) {
      AttentionKernelCaps caps = kH200;
      caps.ws_prefill_paged = ws;
      expect_key(select_attention_kernel(paged, caps).run,
                 ws ? KernelFamily::kWsPrefill : KernelFamily::kWgmmaPrefill, 128, caps, paged);
    }
  }
  // A head dim without a warp-specialised instance takes the wgmma mainloop.
  const AttentionProblem d64 = problem(DType::kBF16, DType::kBF16, 1, 64, 4096);
  expect_key(select_attention_kernel(d64, kH200).run, KernelFamily::kWsPrefill, 128, kH200, d64);
  AttentionKernelCaps no_ws = kH200;
  std::erase_if(no_ws.instances,
                [](const auto& i) { return i.family == KernelFamily::kWsPrefill && i.head_dim_qk == 64; });
  expect_key(select_attention_kernel(d64, no_ws).run, KernelFamily::kWgmmaPrefill, 128, no_ws, d64);
  const AttentionKernelCaps ampere = default_preset(false);
  expect_key(select_attention_kernel(pr, ampere).run, KernelFamily::kTensorCoreTile, 128, ampere, pr);
  const AttentionProblem short_rows = problem(DType::kBF16, DType::kBF16, 4, 128, 16);
  expect_key(select_attention_kernel(short_rows, kH200).run, KernelFamily::kTensorCoreTile, 64, kH200,
             short_rows);
  AttentionProblem portable = pr;
  portable.backend = PrefillBackend::kPortable;
  expect_key(select_attention_kernel(portable, kH200).run, KernelFamily::kTensorCoreTile, 128, kH200,
             portable);
  AttentionProblem mask = pr;
  mask.mask_mode = MaskMode::kCustom;
  expect_key(select_attention_kernel(mask, kH200).run, KernelFamily::kTensorCoreTile, 64, kH200, mask);
  EXPECT_EQ(select_attention_kernel(mask, kH200).run.variant, KernelVariant::kGeneralLogits);
  EXPECT_EQ(select_attention_kernel(pr, ampere).run.variant, KernelVariant::kPlain);
  AttentionProblem split_dims = pr;
  split_dims.head_dim_qk = 192;
  expect_key(select_attention_kernel(split_dims, kH200).run, KernelFamily::kTensorCoreTile, 128, kH200,
             split_dims);
}

// A batch-invariant plan (fixed or no split in a prefill wrapper) takes the kernel of
// long queries whatever the batch's lengths: one query row alone and beside long
// prompts run the same tile.
TEST(AttentionSelector, LengthFreePlansChooseByConfigurationAlone) {
  for (DType kv : {DType::kBF16, DType::kE4M3}) {
    for (std::int64_t group : {1, 2, 4, 8}) {
      for (const bool alibi : {false, true}) {
        AttentionProblem longest = problem(DType::kBF16, kv, group, 128, 4096);
        if (alibi) longest.pos_encoding = PosEncoding::kAlibi;
        longest.length_free_kernel = true;
        const AttentionSelection reference = select_attention_kernel(longest, kH200);
        for (std::int32_t qo : {0, 1, 3, 16, 200}) {
          AttentionProblem pr = longest;
          pr.max_qo_len = qo;
          const AttentionSelection s = select_attention_kernel(pr, kH200);
          EXPECT_EQ(s.run.family, reference.run.family) << "group " << group << " qo " << qo;
          EXPECT_EQ(s.run.launch_rows, reference.run.launch_rows) << "group " << group << " qo " << qo;
          EXPECT_EQ(s.run.variant, reference.run.variant);
          EXPECT_EQ(s.plan.launch_rows, reference.plan.launch_rows);
          // Without the flag, one row per request is decode.
          pr.length_free_kernel = false;
          if (qo == 1)
            EXPECT_NE(select_attention_kernel(pr, kH200).run.launch_rows, reference.run.launch_rows)
                << "group " << group;
        }
      }
    }
  }
}

// The output's dtype is a runtime choice of every family's epilogue: it never changes
// the kernel, for decode, the tiles and the Hopper prefills alike.
TEST(AttentionSelector, OutputDtypeChoosesNoKernel) {
  for (const AttentionProblem& base :
       {problem(DType::kBF16, DType::kBF16, 1, 128, 1), problem(DType::kF16, DType::kF16, 4, 64, 1),
        problem(DType::kBF16, DType::kE4M3, 4, 128, 1), problem(DType::kF16, DType::kF16, 4, 128, 64),
        problem(DType::kBF16, DType::kBF16, 4, 256, 4096)}) {
    AttentionProblem other = base;
    other.o_dtype = testing::other_half_dtype(base.q_dtype);
    const KernelKey a = select_attention_kernel(base, kH200).run, b = select_attention_kernel(other, kH200).run;
    EXPECT_EQ(a.family, b.family);
    EXPECT_EQ(a.instance, b.instance);
    EXPECT_EQ(a.launch_rows, b.launch_rows);
  }
}

TEST(AttentionSelector, AskedForHopperWhereItCannotRunIsAnError) {
  AttentionProblem pr = problem(DType::kBF16, DType::kBF16, 1, 128, 4096);
  pr.backend = PrefillBackend::kHopper;
  expect_key(select_attention_kernel(pr, kH200).run, KernelFamily::kWsPrefill, 128, kH200, pr);
  expect_error([&] { select_attention_kernel(pr, default_preset(false)); }, "options.backend", "sm_90");
  pr.pos_encoding = PosEncoding::kAlibi;
  expect_error([&] { select_attention_kernel(pr, kH200); }, "options.backend", "ALiBi");
}

TEST(AttentionSelector, WhatNoInstanceRunsNamesTheArgumentOrThePreset) {
  AttentionKernelCaps minimal;
  minimal.preset = "minimal";
  for (KernelFamily f : {KernelFamily::kCudaCoreDecode, KernelFamily::kKeyRowTile, KernelFamily::kTensorCoreTile,
                         KernelFamily::kWgmmaPrefill}) {
    minimal.instances.push_back({f, DType::kBF16, DType::kBF16, 128, 128});
  }
  // The error names the smallest preset with a kernel for the configuration (the
  // presets' lists are cmake/KvinferInstances.cmake's), or says that none has one.
  const AttentionProblem d512 = problem(DType::kBF16, DType::kBF16, 4, 512, 1);
  expect_error([&] { select_attention_kernel(d512, minimal); }, "kernel",
               "'minimal' instance preset; the 'default' preset has one");
  const AttentionProblem f16 = problem(DType::kF16, DType::kF16, 4, 128, 1);
  expect_error([&] { select_attention_kernel(f16, minimal); }, "kernel", "-DKVINFER_INSTANCES=default");
  const AttentionProblem mixed = problem(DType::kF16, DType::kBF16, 1, 128, 1);
  expect_error([&] { select_attention_kernel(mixed, kH200); }, "kernel",
               "'default' instance preset; the 'full' preset has one");
  const AttentionProblem d96 = problem(DType::kBF16, DType::kBF16, 4, 96, 1);
  expect_error([&] { select_attention_kernel(d96, minimal); }, "kernel", "the 'full' preset has one");
  const AttentionProblem fp8_q = problem(DType::kE4M3, DType::kE4M3, 4, 128, 1);
  expect_error([&] { select_attention_kernel(fp8_q, minimal); }, "kernel", "in any instance preset (this build: 'minimal')");
  expect_key(select_attention_kernel(problem(DType::kBF16, DType::kBF16, 4, 128, 1), minimal).run,
             KernelFamily::kKeyRowTile, 4, minimal, problem(DType::kBF16, DType::kBF16, 4, 128, 1));
}

}  // namespace
}  // namespace kvinfer::detail
