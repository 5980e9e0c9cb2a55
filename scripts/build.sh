#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures and builds kvinfer in ./build (or $KVINFER_BUILD_DIR): what CI needs, the
# library, the kvinfer program, the tests and the benchmarks (arguments: build only
# these targets instead). Settings, from the environment:
#   KVINFER_CUDA       AUTO (the CUDA backend when nvcc is found), ON or OFF
#   KVINFER_INSTANCES  the kernel instance preset: minimal (bf16, head_dim 128: short
#                      builds on small machines, what CI compiles), default or full
#   KVINFER_BUILD_TESTS, KVINFER_BUILD_BENCH  ON/OFF (default ON)
#   KVINFER_CMAKE_ARGS extra configure arguments;  KVINFER_JOBS parallel jobs
# A new build directory gets KVINFER_CUDA=AUTO and KVINFER_INSTANCES=minimal; an existing
# one keeps what it was configured with unless they are set, so that scripts/run.sh and
# scripts/test.sh on one tree never switch the backend (a rebuild of every kernel) back
# and forth.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${KVINFER_BUILD_DIR:-build}
args=(-DCMAKE_BUILD_TYPE=Release
      -DKVINFER_BUILD_TESTS="${KVINFER_BUILD_TESTS:-ON}" -DKVINFER_BUILD_BENCH="${KVINFER_BUILD_BENCH:-ON}")
fresh=1
[[ -f $build_dir/CMakeCache.txt ]] && fresh=0
if [[ -n ${KVINFER_CUDA:-} ]]; then
  args+=(-DKVINFER_CUDA="$KVINFER_CUDA")
elif ((fresh)); then
  args+=(-DKVINFER_CUDA=AUTO)
fi
if [[ -n ${KVINFER_INSTANCES:-} ]]; then
  args+=(-DKVINFER_INSTANCES="$KVINFER_INSTANCES")
elif ((fresh)); then
  args+=(-DKVINFER_INSTANCES=minimal)
fi
# shellcheck disable=SC2086  # KVINFER_CMAKE_ARGS is a list of words
cmake -S . -B "$build_dir" -G Ninja "${args[@]}" ${KVINFER_CMAKE_ARGS:-} >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "${KVINFER_JOBS:-$(nproc)}" "${targets[@]}"
