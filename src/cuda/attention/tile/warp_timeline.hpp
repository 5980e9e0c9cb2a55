// SPDX-License-Identifier: Apache-2.0
// Host side of the decode tiles' warp timeline (warp_timeline.cuh), in builds with
// the CMake option KVINFER_CUDA_TIMELINE.
#pragma once

#include <cstdint>

namespace kvinfer::cuda {

// A warp's words (warp_timeline.cuh): the global timer (ns) at entry, at its tiles
// k n / 8 for k = 0..7 and at the loop's end (9 checkpoints from word 1), at exit; its
// SM and its tile count n.
inline constexpr int kWarpTimelineWords = 16;
inline constexpr int kTimelineEntry = 0, kTimelineCheckpoint0 = 1, kTimelineCheckpoints = 9, kTimelineExit = 10,
                     kTimelineSm = 11, kTimelineTiles = 12;

#if KVINFER_CUDA_TIMELINE
// The device buffer (zeroed, kWarpTimelineWords words per warp of the launch) that
// the next attention runs' decode tiles write their timeline to; null: none. A
// diagnostic for benchmarks: one process-wide setting, read when a run is launched.
void set_warp_timeline(std::uint64_t* device_buffer);
#endif

}  // namespace kvinfer::cuda
