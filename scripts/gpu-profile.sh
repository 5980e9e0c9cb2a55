#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Profiles one benchmark's cases with Nsight Compute on the GPU machine: builds the
# benchmark (`default` instances, all cores), runs it once in full (its table and
# JSON), then, for each case name given, profiles the kernels of that case's first
# timed launches at the clocks the benchmark runs at.
# Usage: scripts/gpu-profile.sh OUTDIR BENCH [CASE...]
#   e.g. scripts/gpu-profile.sh out bench_decode "64x4096" "1x32768"
# BENCH peer_decode profiles the torch SDPA peers (bench/peer_decode.py) instead, one
# shape per CASE (e.g. "16x8192"): the first 40 kernels (the inputs' generators, then
# three calls of each backend).
# Environment: KVINFER_BUILD_DIR (build-gpu), KVINFER_PROFILE_KERNELS (an ncu kernel
# regex; default: the attention and merge kernels), KVINFER_PROFILE_LAUNCHES (4),
# KVINFER_PROFILE_SASS=1: also each case's first profiled kernel's SASS with its
# per-instruction counters (executions, warp stall samples by reason) as CSV, from
# the profile itself, so kernels generated at run time (cuDNN's) are covered too.
# Writes OUTDIR/BENCH.{log,json} and OUTDIR/ncu-N.txt per case (ncu-peer-N.txt for
# the peers), and with the SASS OUTDIR/sass-N.csv (sass-peer-N.csv).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[[ $# -ge 2 ]] || { echo "usage: $0 OUTDIR BENCH [CASE...]" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
bench=$2
shift 2
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
# sass OUTFILE KERNEL_REGEX LAUNCH_SKIP COMMAND...: the SASS page of one profiled launch.
sass() {
  local file=$1 kernels=$2 skip=$3
  shift 3
  [[ ${KVINFER_PROFILE_SASS:-0} == 1 ]] || return 0
  local rep
  rep=$(mktemp -u)
  timeout 200 "$ncu" --clock-control none -k "$kernels" --launch-skip "$skip" --launch-count 1 \
    --section SourceCounters --section WarpStateStats -o "$rep" "$@" >/dev/null 2>&1
  "$ncu" --import "$rep.ncu-rep" --page source --print-source sass --csv >"$file" 2>&1 || echo "no SASS page ($file)"
  rm -f "$rep.ncu-rep"
}
if [[ $bench == peer_decode ]]; then
  n=0
  for case_name in "$@"; do
    n=$((n + 1))
    {
      echo "case: $case_name (torch SDPA peers)"
      timeout 200 "$ncu" --clock-control none --kernel-name-base demangled --launch-count 40 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
        python3 bench/peer_decode.py --profile "$case_name"
    } >"$out/ncu-peer-$n.txt" 2>&1
    sass "$out/sass-peer-$n.csv" "${KVINFER_PROFILE_KERNELS:-regex:fprop}" 0 \
      python3 bench/peer_decode.py --profile "$case_name"
  done
  exit 0
fi
build=${KVINFER_BUILD_DIR:-build-gpu}
deps_args=()
[[ -d .deps ]] && deps_args=(-DKVINFER_DEPS_DIR="$PWD/.deps")
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINFER_CUDA=ON -DKVINFER_INSTANCES=default \
  "${deps_args[@]}" >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target "$bench" >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
exe="$build/bench/$bench"

"$exe" --json "$out/$bench.json" >"$out/$bench.log" 2>&1 || echo "$bench failed (rc $?)"

kernels=${KVINFER_PROFILE_KERNELS:-regex:decode_kernel|prefill_kernel|merge}
n=0
for case_name in "$@"; do
  n=$((n + 1))
  {
    echo "case: $case_name"
    # Skip the warm-up launches; --clock-control none keeps the boost clocks the
    # benchmark's timings ran at.
    timeout 200 "$ncu" --clock-control none --kernel-name-base demangled -k "$kernels" \
      --launch-skip 2 --launch-count "${KVINFER_PROFILE_LAUNCHES:-4}" \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
      --section LaunchStats --section WarpStateStats --section SchedulerStats \
      --section ComputeWorkloadAnalysis --section InstructionStats \
      "$exe" --filter "$case_name" --runs 1
  } >"$out/ncu-$n.txt" 2>&1
  sass "$out/sass-$n.csv" "$kernels" 2 "$exe" --filter "$case_name" --runs 1
done
