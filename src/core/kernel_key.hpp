// SPDX-License-Identifier: Apache-2.0
// The key of a kernel: which family, which compiled instance and which tile shape a
// plan runs. Chosen once when planning (the backend's selector), stored in the plan
// and read by run() and the launchers, which never choose again.
#pragma once

#include <cstdint>

namespace kvinfer::detail {

// The kernel a plan runs on, as its backend's selector chose it at plan time:
// run() launches it and decides nothing again. Plain values, opaque to core.
enum class KernelFamily : std::uint8_t {
  kCpu,             // the CPU backend's kernels
  kCudaCoreDecode,  // CUDA-core decode (one query row per request)
  kKeyRowTile,      // the key-row decode tile (keys as the mma's M; up to 8 rows)
  kTensorCoreTile,  // the portable mma.sync tiles (16, 64, 128 rows)
  kFp8DecodeTile,   // the 16-row decode tile with fp8 K/V converted in registers
  kWgmmaPrefill,    // the sm90 wgmma prefill mainloop
  kWsPrefill,       // the sm90 warp-specialised prefill (TMA producer, wgmma consumers)
  kPaddedTile,      // the tensor-core tile over head dims zero-padded to its instance's
  kMla,             // the MLA kernel (latent KV shared by every head)
  kMlaWgmma,        // the sm90 MLA kernel on wgmma (items of 64 rows, 16-bit KV)
};

// Variants of a family's kernel the key may name (a template flag of the kernel).
enum class KernelVariant : std::uint8_t {
  kPlain,
  kGeneralLogits,  // the tensor-core tile with custom mask, ALiBi and soft cap
};

struct KernelKey {
  KernelFamily family = KernelFamily::kCpu;
  std::int32_t instance = -1;    // index in the backend's registry of compiled instances
  std::int32_t launch_rows = 0;  // the launched tile's packed rows (may differ from the plan's q_tile_rows)
  KernelVariant variant = KernelVariant::kPlain;
};

}  // namespace kvinfer::detail
