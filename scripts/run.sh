#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job on a fresh machine: install what is missing, build the library and the
# kvinfer program only (no tests, no benchmarks), run it (by default `kvinfer serve`,
# the serving simulation; arguments replace it, e.g. `info`).
# The CUDA backend is built when a GPU is present (`nvidia-smi -L` lists one), with the
# `default` kernel instance preset, or when asked (KVINFER_CUDA=ON; KVINFER_INSTANCES
# picks the preset). Without a GPU a new build directory leaves it out (nvcc alone makes
# no kernel runnable, and compiling them would take most of the time to the first
# report); an existing one keeps its configuration (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build_dir=${KVINFER_BUILD_DIR:-build}
if [[ -z ${KVINFER_CUDA:-} ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    export KVINFER_CUDA=ON
  elif [[ ! -f $build_dir/CMakeCache.txt ]]; then
    export KVINFER_CUDA=OFF
  fi
fi
if [[ ${KVINFER_CUDA:-} == ON ]]; then
  export KVINFER_INSTANCES=${KVINFER_INSTANCES:-default}
fi
KVINFER_BUILD_TESTS=OFF KVINFER_BUILD_BENCH=OFF scripts/build.sh kvinfer_cli
exec "$build_dir/kvinfer" "${@:-serve}"
