// SPDX-License-Identifier: Apache-2.0
// A diagnostic timeline of the decode tiles' warps, compiled in only with the CMake
// option KVINFER_CUDA_TIMELINE (bench_decode then prints it; scripts/gpu-timeline.sh).
// It answers what event timing cannot: when each warp starts, how fast it streams its
// tiles and when it finishes, per SM, so that the ramp at the start of a kernel and
// the tail at its end (multiprocessors that stream at different speeds finishing at
// different times) can be measured. Without the option WarpTimeline does nothing.
//
// Layout: kWarpTimelineWords 64-bit words per warp at (block * warps + warp), written
// by lane 0: word 0 globaltimer (ns) at entry, words 1-9 at tiles k n / 8 (k = 0..7)
// and at the loop's end, word 10 at exit, word 11 the SM id, word 12 n (the warp's
// tiles). A warp that returns before its loop (an unused item) writes nothing.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/warp_timeline.hpp"

namespace kvinfer::cuda {

#if KVINFER_CUDA_TIMELINE
class WarpTimeline {
 public:
  __device__ explicit WarpTimeline(const AttentionKernelParams& p)
      : out_(p.timeline != nullptr && threadIdx.x % 32 == 0
                 ? p.timeline + (std::uint64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * kWarpTimelineWords
                 : nullptr) {
    stamp(kTimelineEntry);
  }
  WarpTimeline(const WarpTimeline&) = delete;
  WarpTimeline& operator=(const WarpTimeline&) = delete;
  // Before tile t of the warp's n (t = n once the loop is done).
  __device__ __forceinline__ void tile(int t, int n) {
    if (out_ != nullptr && next_ < kTimelineCheckpoints && t * 8 >= next_ * n) {
      stamp(kTimelineCheckpoint0 + next_);
      out_[kTimelineTiles] = std::uint64_t(n);
      ++next_;
    }
  }
  __device__ ~WarpTimeline() {
    if (out_ != nullptr && next_ > 0) {
      stamp(kTimelineExit);
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      out_[kTimelineSm] = sm;
    } else if (out_ != nullptr) {
      out_[kTimelineEntry] = 0;  // no tiles: not a streaming warp
    }
  }

 private:
  __device__ __forceinline__ void stamp(int word) {
    if (out_ == nullptr) return;
    std::uint64_t ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    out_[word] = ns;
  }
  std::uint64_t* out_;
  int next_ = 0;
};
#else
class WarpTimeline {
 public:
  __device__ explicit WarpTimeline(const AttentionKernelParams&) {}
  __device__ __forceinline__ void tile(int, int) {}
};
#endif

}  // namespace kvinfer::cuda
