#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Profiles kernels of one benchmark with Nsight Compute on the GPU machine, after
# scripts/gpu-check.sh built it: speed of light, occupancy, warp stall reasons,
# scheduler and instruction statistics, as text in OUTDIR/profile-<bench>.txt.
# Usage: scripts/gpu-profile.sh OUTDIR BENCH KERNEL_REGEX [COUNT] [bench args...]
#   e.g. scripts/gpu-profile.sh out bench_prefill prefill_kernel 2 --quick
set -uo pipefail
out=$1 bench=$2 kernel=$3 count=${4:-1}
shift 4 2>/dev/null || shift $#
build=${KVINFER_BUILD_DIR:-build-gpu}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mkdir -p "$out"
timeout 300 "$ncu" --kernel-name "regex:$kernel" --launch-count "$count" \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
  --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section InstructionStats \
  "$build/bench/$bench" --runs 1 "$@" >"$out/profile-$bench.txt" 2>&1
echo "ncu rc $? -> $out/profile-$bench.txt"
