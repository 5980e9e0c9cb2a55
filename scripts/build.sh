#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures and builds kvinfer in ./build (or $KVINFER_BUILD_DIR).
# The CUDA backend is built when nvcc is found (KVINFER_CUDA=AUTO), with the
# instance preset $KVINFER_INSTANCES (default: minimal, which keeps builds on small
# machines short; the GPU machine builds `default`).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${KVINFER_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DKVINFER_CUDA="${KVINFER_CUDA:-AUTO}" \
  -DKVINFER_INSTANCES="${KVINFER_INSTANCES:-minimal}" \
  ${KVINFER_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j "${KVINFER_JOBS:-$(nproc)}"
