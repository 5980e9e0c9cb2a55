// SPDX-License-Identifier: Apache-2.0
// The shape of the MLA wgmma kernel (sm_90a) and its shared-memory layout: a CTA of
// two consumer warpgroups and one producer warpgroup over an item of 64 packed query
// rows, in key tiles of 64 latent rows. Every other piece of the family derives its
// loops and offsets from here. Included by its kernel.cuh.
//
// Why this split of the work: O (64 rows x 512 columns in fp32) fills half the
// register file, so each consumer warpgroup owns half of its columns; Q stays in shared
// memory (in registers it would not fit beside O). Each warpgroup computes the logits
// of its half of the tile's keys (m64n32 over all 576 dims), the two exchange their row
// maxima and their P halves through shared memory, and each runs O_half += P V_half
// over all 64 keys with P from registers. So S is computed once, V is read once per
// warpgroup, and nothing is reduced across warpgroups but the two maxima per tile and
// the row sums at the end.
#pragma once

namespace kvinfer::cuda {

template <bool kKpe_>
struct MlaWgmmaShape {
  static constexpr bool kKpe = kKpe_;             // with the rotary part (q_pe, kpe)
  static constexpr int kRows = 64;                // packed query rows of an item
  static constexpr int kKeys = 64;                // latent rows per key tile
  static constexpr int kDc = 512;                 // ckv columns: the value width
  static constexpr int kDqk = kKpe ? 576 : 512;   // a key row: ckv, then kpe
  static constexpr int kPanels = kDqk / 64;       // 64-column panels (128-byte swizzle)
  static constexpr int kNopeSteps = kDc / 16;     // k-steps of q_nope . ckv
  static constexpr int kPeSteps = (kDqk - kDc) / 16;
  static constexpr int kHalfKeys = kKeys / 2;     // keys of a warpgroup's logits
  static constexpr int kKeyFrags = kHalfKeys / 8; // n8 fragments of them
  static constexpr int kHalfCols = kDc / 2;       // columns of a warpgroup's O
  static constexpr int kOFrags = kHalfCols / 8;
  static constexpr int kPSteps = kHalfKeys / 16;  // k-steps of P V per half of the keys
  static constexpr int kStages = 2;               // key tiles in the ring

  static constexpr int kConsumerThreads = 256;
  static constexpr int kProducerThreads = 128;
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;
  // setmaxnreg: 2 x 128 x 232 + 128 x 40 <= the register file's 65536.
  static constexpr int kConsumerRegs = 232;
  static constexpr int kProducerRegs = 40;

  // Named barriers (0 is __syncthreads): the consumers' Q, maxima and P exchanges, and
  // the producer warpgroup's table.
  static constexpr int kQBarrier = 1;
  static constexpr int kMaxBarrier = 2;
  static constexpr int kPBarrier = 3;
  static constexpr int kTableBarrier = 4;

  // Byte offsets from the 1024-aligned base.
  static constexpr int kPanelBytes = kKeys * 128;  // = kRows * 128
  static constexpr int kTileBytes = kPanels * kPanelBytes;
  static constexpr int q = 0;
  static constexpr int kv = q + kPanels * kRows * 128;
  // P of each warpgroup as the other's A fragments: [warpgroup][k-step][warp][lane] x 16 bytes.
  static constexpr int p_exchange = kv + kStages * kTileBytes;
  static constexpr int kPExchangeBytes = kPSteps * 4 * 32 * 16;
  // Row maxima (then the row sums) of each warpgroup: [warpgroup][row] floats.
  static constexpr int row_exchange = p_exchange + 2 * kPExchangeBytes;
  // The producer's table of the tile's rows: ckv and kpe byte offsets.
  static constexpr int table = row_exchange + 2 * kRows * 4;
  // full[kStages] (the tile's copies landed), empty[kStages] (both consumers done).
  static constexpr int barriers = table + kKeys * 2 * 8;
  static constexpr int bytes = barriers + 2 * kStages * 8;
  static constexpr int kSmem = bytes + 1024;  // the dynamic base aligned up to 1024
  static_assert(kSmem <= 227 * 1024, "sm_90's shared memory per CTA");
};

}  // namespace kvinfer::cuda
