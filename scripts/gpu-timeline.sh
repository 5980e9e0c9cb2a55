#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The decode tiles' warp timeline on the GPU machine: builds bench_decode with the
# CMake option KVINFER_CUDA_TIMELINE (`default` instances, all cores) in its own build
# folder and runs it; per case, the aggregate read rate over the kernel's span and each
# SM's loop end (src/cuda/attention/warp_timeline.cuh, bench/common/warp_timeline.hpp).
# Usage: scripts/gpu-timeline.sh OUTDIR [FILTER]   (FILTER: bench_decode --filter)
# Writes OUTDIR/timeline.txt (the timelines), OUTDIR/bench_decode.log (its table; the
# times include the timeline's stores) and OUTDIR/build.log.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[[ $# -ge 1 ]] || { echo "usage: $0 OUTDIR [FILTER]" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
dir=${KVINFER_BUILD_DIR:-build-timeline}
deps_args=()
[[ -d .deps ]] && deps_args=(-DKVINFER_DEPS_DIR="$PWD/.deps")
filter=()
[[ $# -ge 2 ]] && filter=(--filter "$2")
{ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINFER_CUDA=ON -DKVINFER_INSTANCES=default \
    -DKVINFER_CUDA_TIMELINE=ON "${deps_args[@]}" &&
    cmake --build "$dir" -j "$(nproc)" --target bench_decode; } >"$out/build.log" 2>&1 ||
  { echo "build failed"; tail -30 "$out/build.log"; exit 1; }
"$dir/bench/bench_decode" "${filter[@]}" >"$out/bench_decode.log" 2>"$out/timeline.txt"
rc=$?
echo "bench_decode: rc $rc, $(grep -c '^timeline' "$out/timeline.txt") timelines in $out/timeline.txt"
exit $rc
