// SPDX-License-Identifier: Apache-2.0
// What every wrapper's plan() and run() share: the CUDA-graph capacity, the
// workspace size, and the per-call run options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "kvinfer/core/device.hpp"
#include "kvinfer/core/index_status.hpp"
#include "kvinfer/core/tensor.hpp"

namespace kvinfer {

// Fixed capacity for CUDA-graph capture: a plan made within it keeps its workspace
// offsets and grid sizes, so one captured run() replays after any re-plan that fits.
struct Capacity {
  std::int64_t max_batch = 0;      // requests
  std::int64_t max_qo_tokens = 0;  // query rows (decode: = max_batch)
  std::int64_t max_kv = 0;         // pages (paged wrappers) or key tokens (ragged)
};

// Bytes of the two workspace buffers a plan uses on its device: float32 partial
// states of split-KV, and the int schedule (mirrored in pinned host memory on a GPU).
struct WorkspaceSize {
  std::size_t float_bytes = 0;
  std::size_t int_bytes = 0;
};

struct RunOptions {
  TensorView lse;         // optional out: float32 [nnz_q, num_qo_heads], base-2 LSE
  float k_scale = 1.0f;   // fp8 KV: dequantisation scale of K (folded into sm_scale)
  float v_scale = 1.0f;   // fp8 KV: dequantisation scale of V (multiplies o)
  Stream stream = nullptr;
  // Programmatic dependent launch (FlashInfer's enable_pdl): run()'s first kernel may
  // start while the kernel before it on the stream finishes; it reads only its plan
  // until that kernel's writes are visible. This hides the launch gap between the
  // kernels of a model's layer (append, attention, projection). Unset: on where the
  // device has it (compute capability 9.0 with the sm_90a build), as FlashInfer's
  // default; true on any other GPU is an error. The CPU backend ignores it.
  std::optional<bool> enable_pdl;
  // The checked mode of kv_indices on a GPU. In a build with device index checks
  // (KVINFER_DEVICE_INDEX_CHECKS, kvinfer/core/index_status.hpp) run() waits for its
  // kernels, reads the wrapper's device status and throws kvinfer::Error for the first
  // bad page id they met; otherwise it copies the page ids to the host and throws for
  // the first one out of range, before any kernel. Unset: on when the environment has
  // KVINFER_CHECK_INDICES=1. It synchronises, so a serving loop leaves it off (and,
  // with device checks, polls status() at its own synchronisation points). The CPU
  // backend always checks.
  std::optional<bool> check_indices;
};

// How the planner splits long KV ranges into chunks that are attended separately
// and merged (split-KV).
struct SplitOptions {
  std::int64_t fixed_split_size = -1;  // > 0: chunks of this many tokens (paged: rounded up to
                                       // whole pages); results then do not depend on the batch
  bool disable_split_kv = false;
};

}  // namespace kvinfer
