// SPDX-License-Identifier: Apache-2.0
// The decode tiles' warp timeline (src/cuda/attention/tile/warp_timeline.cuh), read back
// and summarised, in builds with the CMake option KVINFER_CUDA_TIMELINE.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

namespace kvinfer::bench {

// Runs `run` twice back to back (as the timed runs are), the second with the
// timeline on, and prints to `out`: the aggregate read rate (GB/s, from the tiles the
// warps finish between their checkpoints, over kv_bytes / all tiles per tile) and the
// warps streaming, in 25 steps of the kernel's span; and each SM's mean loop end
// (µs after the first warp's start), sorted. Prints nothing in other builds.
void print_warp_timeline(std::FILE* out, const std::string& name, double kv_bytes, const std::function<void()>& run);

}  // namespace kvinfer::bench
