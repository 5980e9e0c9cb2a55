// SPDX-License-Identifier: Apache-2.0
// Host side of the decode tiles' warp timeline (warp_timeline.cuh), in builds with
// the CMake option KVINFER_CUDA_TIMELINE.
#pragma once

#include <cstdint>

namespace kvinfer::cuda {

#if KVINFER_CUDA_TIMELINE
// The device buffer (zeroed, kWarpTimelineWords words per warp of the launch) that
// the next attention runs' decode tiles write their timeline to; null: none. A
// diagnostic for benchmarks: one process-wide setting, read when a run is launched.
void set_warp_timeline(std::uint64_t* device_buffer);
#endif

}  // namespace kvinfer::cuda
