// SPDX-License-Identifier: Apache-2.0
#include "bench/common/warp_timeline.hpp"

#if KVINFER_CUDA_TIMELINE
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "cuda/attention/tile/warp_timeline.hpp"
#include "cuda/check.cuh"
#endif

namespace kvinfer::bench {

#if KVINFER_CUDA_TIMELINE
namespace {

using cuda::kTimelineCheckpoint0, cuda::kTimelineCheckpoints, cuda::kTimelineEntry, cuda::kTimelineExit,
    cuda::kTimelineSm, cuda::kTimelineTiles;
constexpr int kWords = cuda::kWarpTimelineWords;
constexpr int kCheckpoints = kTimelineCheckpoints;
constexpr int kSteps = 25;  // of the printed rate

struct Warp {
  double checkpoint[kCheckpoints];  // µs after the first warp's start
  double exit;
  int sm, tiles;
};

std::vector<Warp> read_warps(const std::vector<std::uint64_t>& words) {
  std::uint64_t t0 = ~std::uint64_t(0);
  const auto streamed = [&](std::size_t i) { return words[i + kTimelineEntry] != 0 && words[i + kTimelineExit] != 0; };
  for (std::size_t i = 0; i + kWords <= words.size(); i += kWords) {
    if (streamed(i)) t0 = std::min(t0, words[i + kTimelineEntry]);
  }
  std::vector<Warp> warps;
  for (std::size_t i = 0; i + kWords <= words.size(); i += kWords) {
    if (!streamed(i)) continue;
    Warp w;
    for (int k = 0; k < kCheckpoints; ++k) w.checkpoint[k] = double(words[i + kTimelineCheckpoint0 + k] - t0) / 1e3;
    w.exit = double(words[i + kTimelineExit] - t0) / 1e3;
    w.sm = int(words[i + kTimelineSm]);
    w.tiles = int(words[i + kTimelineTiles]);
    warps.push_back(w);
  }
  return warps;
}

}  // namespace

void print_warp_timeline(std::FILE* out, const std::string& name, double kv_bytes, const std::function<void()>& run) {
  constexpr std::size_t kBufferWords = std::size_t(1) << 22;  // 262144 warps
  std::uint64_t* buffer = nullptr;
  KVINFER_CUDA_CHECK(cudaMalloc(&buffer, kBufferWords * sizeof(std::uint64_t)));
  KVINFER_CUDA_CHECK(cudaMemset(buffer, 0, kBufferWords * sizeof(std::uint64_t)));
  KVINFER_CUDA_CHECK(cudaDeviceSynchronize());
  run();  // the traced run follows another, as the timed runs do
  cuda::set_warp_timeline(buffer);
  run();
  cuda::set_warp_timeline(nullptr);
  std::vector<std::uint64_t> words(kBufferWords);
  KVINFER_CUDA_CHECK(cudaMemcpy(words.data(), buffer, kBufferWords * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
  KVINFER_CUDA_CHECK(cudaFree(buffer));

  const std::vector<Warp> warps = read_warps(words);
  if (warps.empty()) {
    std::fprintf(out, "timeline %s: no decode tile warps\n", name.c_str());
    return;
  }
  double end = 0.0, tiles = 0.0;
  for (const Warp& w : warps) {
    end = std::max(end, w.exit);
    tiles += w.tiles;
  }
  // Tiles finished per step: a warp's tiles between two checkpoints spread evenly
  // over the time between them.
  const double step = end / kSteps;
  std::vector<double> done(kSteps, 0.0), busy(kSteps, 0.0);
  for (const Warp& w : warps) {
    for (int k = 0; k + 1 < kCheckpoints; ++k) {
      const int first = (k * w.tiles + 7) / 8, last = ((k + 1) * w.tiles + 7) / 8;
      const double a = w.checkpoint[k], b = w.checkpoint[k + 1];
      if (last <= first || b <= a) continue;
      for (int s = int(a / step); s < kSteps && s * step < b; ++s) {
        const double lo = std::max(a, s * step), hi = std::min(b, (s + 1) * step);
        if (hi <= lo) continue;
        done[s] += (last - first) * (hi - lo) / (b - a);
        busy[s] += (hi - lo) / step;
      }
    }
  }
  const double bytes_per_tile = kv_bytes / tiles;
  std::fprintf(out, "timeline %s: %zu warps, %.1f us; GB/s / warps streaming per %.1f us:\n ", name.c_str(),
               warps.size(), end, step);
  for (int s = 0; s < kSteps; ++s) std::fprintf(out, " %.0f/%.0f", done[s] * bytes_per_tile / (step * 1e3), busy[s]);
  std::fprintf(out, "\n");

  std::map<int, std::pair<double, int>> by_sm;  // sum of loop ends, warps
  for (const Warp& w : warps) {
    auto& [sum, count] = by_sm[w.sm];
    sum += w.checkpoint[kCheckpoints - 1];
    ++count;
  }
  std::vector<std::pair<double, int>> ends;
  for (const auto& [sm, sc] : by_sm) ends.emplace_back(sc.first / sc.second, sm);
  std::sort(ends.begin(), ends.end());
  std::fprintf(out, "  loop end by SM (us:sm):");
  for (const auto& [t, sm] : ends) std::fprintf(out, " %.0f:%d", t, sm);
  std::fprintf(out, "\n");
}
#else
void print_warp_timeline(std::FILE*, const std::string&, double, const std::function<void()>&) {}
#endif

}  // namespace kvinfer::bench
