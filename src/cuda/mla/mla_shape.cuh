// SPDX-License-Identifier: Apache-2.0
// The MLA tile's shape (how its 8 warps split S = Q K^T and O += P V of a key tile)
// and its shared-memory layout: every other piece of the kernel derives its loops and
// offsets from these two, so they sit apart from the code. Included by mla_kernel.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace kvinfer::cuda {

template <int kRowBlocks, bool kKpe_>
struct MlaShape {
  static constexpr bool kKpe = kKpe_;  // with the rotary part (q_pe, kpe)
  static constexpr int kWarps = 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kDc = 512;                // ckv columns: the value width
  static constexpr int kDqk = kKpe ? 576 : 512;  // a key row: ckv, then kpe
  static constexpr int kRows = 16 * kRowBlocks;  // packed query rows of an item
  static constexpr int kKeys = 32;               // keys per tile
  static constexpr int kKeyFrags = kKeys / 8;    // n8 fragments of S per row block
  static constexpr int kQkSteps = kDqk / 16;     // k-steps of S
  static constexpr int kNopeSteps = kDc / 16;    // the first kNopeSteps are q_nope . ckv
  // S: units of (row block, 8 keys); with fewer units than warps, kKParts warps share
  // a unit, each over a contiguous part of the k-steps.
  static constexpr int kUnits = kRowBlocks * kKeyFrags;
  static constexpr int kKParts = kUnits >= kWarps ? 1 : kWarps / kUnits;
  static constexpr int kUnitsPerWarp = kUnits >= kWarps ? kUnits / kWarps : 1;
  static constexpr int kPartSteps = kQkSteps / kKParts;
  // O: kColSplit warps per row block, kCols columns each.
  static constexpr int kColSplit = kWarps / kRowBlocks;
  static constexpr int kCols = kDc / kColSplit;
  static constexpr int kOFrags = kCols / 8;
  // Floats per row of the S exchange: 8 more than the keys spread a fragment's rows
  // over the banks.
  static constexpr int kSStride = kKeys + 8;
  // The copy of a key tile: kThreads / kKeys threads per key, one page lookup each.
  static constexpr int kThreadsPerKey = kThreads / kKeys;

  static_assert(kRowBlocks == 1 || kRowBlocks == 2 || kRowBlocks == 4);
  static_assert(kUnits % kWarps == 0 || kWarps % kUnits == 0);
  static_assert(kUnitsPerWarp <= 2 && kKeyFrags % kUnitsPerWarp == 0);
  static_assert(kPartSteps % 2 == 0 && kNopeSteps % 2 == 0,
                "k-steps go in pairs that do not mix nope and pe");
  static_assert(kThreadsPerKey == 8);
};

// The mma operand type: the query's, fp16 for fp8 KV (mla_q_to_half), and bf16 where
// fp16 and bf16 mix (the `full` preset: the fp16 side converted to bf16, whose range
// holds it; docs/semantics.md, "Mixed fp16 and bf16").
template <class TQ, class TKV>
using MlaMmaType = std::conditional_t<sizeof(TKV) == 1, __half,
                                      std::conditional_t<std::is_same_v<TQ, TKV>, TQ, __nv_bfloat16>>;

// Byte offsets of the shared-memory regions: the q tile, the S exchange, the ring of
// kStages key tiles the copies land in (16-bit KV: swizzled for ldmatrix; fp8: raw
// tiles, read in registers by mla_fp8.cuh). The ring takes what the CTA's share of
// the SM's shared memory leaves, up to 8 tiles. Items of 16 rows run several CTAs per
// SM, whose tile chains (copy issue, S, barriers, softmax, P V) overlap: with one CTA
// per SM and 4 stages in flight instead of one, 16 heads took 1.2x as long
// (docs/kernels.md, "MLA"): the chain, not the bytes in flight, sets their pace. Two
// CTAs per SM: three (which fp8's half-size tiles would allow, with two stages and 80
// registers) ran no faster, the SM's shared-memory pipe being the busier bound then.
template <class TKV, int kRowBlocks, bool kKpe>
struct MlaSmem {
  using S = MlaShape<kRowBlocks, kKpe>;
  static constexpr bool kFp8 = sizeof(TKV) == 1;
  static constexpr int kStageBytes = S::kKeys * S::kDqk * int(sizeof(TKV));
  static constexpr int q = 0;
  static constexpr int s = q + S::kRows * S::kDqk * 2;
  static constexpr int stages =
      s + (S::kKParts * S::kRows * S::kSStride * int(sizeof(float)) + 127) / 128 * 128;
  static constexpr int kCtasPerSm = kRowBlocks == 1 ? 2 : 1;
  // The CTA's share of the SM's 228 KiB of shared memory (sm_90; 1 KiB of each CTA's
  // share is reserved).
  static constexpr int kBudget = (228 / kCtasPerSm - 1) * 1024;
  static constexpr int kStages = (kBudget - stages) / kStageBytes < 8 ? (kBudget - stages) / kStageBytes : 8;
  static constexpr int bytes = stages + kStages * kStageBytes;
  static_assert(s % 128 == 0 && stages % 128 == 0 && kStageBytes % 128 == 0 && kStages >= 2);
};

}  // namespace kvinfer::cuda
