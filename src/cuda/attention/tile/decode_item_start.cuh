// SPDX-License-Identifier: Apache-2.0
// How a one-warp decode tile (the key-row tile, the fp8 decode tile) starts its work
// item once it has one: its request's entry, the programmatic wait, and the first
// pages of its keys looked up from the item alone (item_keys_ahead) while that entry
// is still in flight, as the tensor-core family's one-warp tile does. Both tiles
// start the same way, so the sequence is written once; each kernel reads its item
// (load_work_item, unused_item) and starts its timeline before, so that an unused
// item writes nothing and the timeline's entry stamp precedes the wait.
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/item_keys.cuh"
#include "cuda/attention/tile/key_access.cuh"

namespace kvinfer::cuda {

// The started item of a one-warp decode tile of kKeys-key tiles (kItemWarps: one of
// the CTA's item warps, item_warps.cuh). The kernel holds the PagesAhead itself and
// passes it in: as a member of this struct it cost the key-row tile's main loop
// register copies (the page window's state, carried through the loop).
template <int kKeys, bool kItemWarps>
struct DecodeItemStart {
  KeyLocator locate;
  detail::RequestInfo r;
  ItemKeys guess;  // the keys the first pages were looked up for

  __device__ __forceinline__ DecodeItemStart(const AttentionKernelParams& p, const detail::WorkItem& item,
                                             PagesAhead<kKeys>& ahead)
      : locate(item_locator(p, item)), r(p.schedule.requests[item.request]) {
    wait_for_inputs();
    guess = item_keys_ahead<kItemWarps>(item, kKeys);
    if (guess.key_end > guess.key_begin)
      ahead.start(locate, guess.key_begin, guess.tile_step(kKeys), guess.key_end);
  }
  // The keys of this warp: those its item's rows see (no custom mask: these tiles run
  // plain logits), and with item warps the warp's turns of its tiles.
  __device__ __forceinline__ ItemKeys warp_keys(const AttentionKernelParams& p,
                                                const detail::WorkItem& item) const {
    ItemKeys keys = item_keys(p, item, r, nullptr);
    if constexpr (kItemWarps) keys.keep_warp_turns(int(threadIdx.x) / 32, int(blockDim.x) / 32, kKeys);
    return keys;
  }
  // Before the first tile's copies: the first pages again in the rare case that the
  // request's entry clipped the item's keys.
  __device__ __forceinline__ void recheck_pages(PagesAhead<kKeys>& ahead, int key_begin, int step,
                                                int key_end) const {
    if (key_begin != guess.key_begin || key_end != guess.key_end)
      ahead.start(locate, key_begin, step, key_end);
  }
};

}  // namespace kvinfer::cuda
