// SPDX-License-Identifier: Apache-2.0
// The warp-specialised prefill's tile shape, register split and shared-memory layout:
// Q, then the ring of K stages, then that of V (each tile in 64-column panels of
// 128-byte rows in wgmma's 128-byte swizzle, as the TMA boxes land them), then the
// ring's barriers. Included by its kernel.cuh.
#pragma once

#include <cstdint>

namespace kvinfer::cuda {

template <int D>
struct WsPrefillShape {
  // Two consumer warpgroups (threads 0-255, 64 query rows each, the layout of the
  // wgmma mainloop's CTA so that its epilogues serve unchanged) and one producer
  // warpgroup (threads 256-383) whose first warp issues the copies.
  static constexpr int kConsumerThreads = 256;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kTileRows = 128;
  // Keys per tile: 128 where the consumers' registers hold S (64 x 128 fp32: 64 per
  // thread) beside O (64 x D: D / 2 per thread) and P: 160 at head_dim 128 of the 232
  // a consumer gets. At 256, O alone takes 128, so the tile is 64 keys (S 32, P 16).
  static constexpr int kKeys = D <= 128 ? 128 : 64;
  static constexpr int kKeyFrags = kKeys / 8;
  static constexpr int kVoFrags = D / 8;
  static constexpr int kQkSteps = D / 16;
  static constexpr int kPvSteps = kKeys / 16;
  static constexpr int kPanels = D / 64;  // 64-column panels per row (one TMA box each)
  // Ring depth: a copy has kStages - 1 tiles of compute to land in. Two stages of K and
  // of V fill 160 KB at head_dim 128 and 192 KB at 256 beside Q; at 64 three fit
  // (112 KB) and cover a tile's shorter compute.
  static constexpr int kStages = D == 64 ? 3 : 2;
  // The consumers issue their wgmma without taking turns (ping-pong): with the softmax of
  // each tile already under the warpgroup's own P V, turns measured 0.96-1.01x the time
  // at head_dim 128 and 1.03-1.09x at 64 (docs/log/ws-prefill-2026-12-03.md).
  // Named barriers: 1 and 2 are the staged epilogue's (one per warpgroup), kQBarrier the
  // consumers' (Q landed; Q's bytes free for the staged epilogue).
  static constexpr int kQBarrier = 3;
  static constexpr int kGatherBarrier = 4;  // the producer warpgroup's (paged KV)
  // setmaxnreg budgets: 2 x 128 x 232 + 128 x 40 = 64 512 of the 65 536 registers. The
  // producer's paged gathers hold four 64-bit row offsets at once to fit 40 without a
  // spill (eight spilled at head_dim 64); the consumers' code takes at most 216
  // (head_dim 256).
  static constexpr int kConsumerRegs = 232;
  static constexpr int kProducerRegs = 40;
  // Shared memory, from a 1024-byte boundary (the swizzle's atoms).
  static constexpr int q = 0;
  static constexpr int tile_bytes = kKeys * D * 2;  // one K or V stage
  static constexpr int k_stage = tile_bytes, v_stage = tile_bytes;
  static constexpr int k = q + kTileRows * D * 2;
  static constexpr int v = k + kStages * tile_bytes;
  static constexpr int barriers = v + kStages * tile_bytes;
  // full_k, full_v, empty_k, empty_v (kStages each), then the tail barrier.
  static constexpr int kBarriers = 4 * kStages + 1;
  // Paged KV: the byte offsets of a key tile's rows in the cache, for two tiles
  // (ws_prefill/gather.cuh).
  static constexpr int row_offsets = barriers + kBarriers * 8;
  static constexpr int bytes = row_offsets + 2 * kKeys * 8;
  static constexpr int kSmem = bytes + 1024;  // slack to align the base to 1024 bytes
  static_assert(kSmem <= 227 * 1024, "the ring must fit the 227 KB a CTA may use");
};

}  // namespace kvinfer::cuda
