#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CPU tests under the sanitizers (CMakePresets.json, clang):
#   asan  every CPU test but `slow` under AddressSanitizer + UndefinedBehaviorSanitizer
#         (halt on the first report; the fuzzers' seed corpora are replayed too)
#   tsan  the thread-pool tests (tests/threads, label `threads`: the one pool, wrappers
#         run from several threads at once, nesting, exceptions) under ThreadSanitizer
# Builds in build-asan/ and build-tsan/. Arguments are passed to the asan ctest run
# (e.g. -R Paged, or -L slow for the wide grids). KVINFER_SANITIZERS="asan" or "tsan"
# runs one of the two; KVINFER_JOBS sets the parallel jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
jobs=${KVINFER_JOBS:-$(nproc)}
for preset in ${KVINFER_SANITIZERS:-asan tsan}; do
  echo "sanitize: $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  if [[ $preset == asan ]]; then
    ctest --preset "$preset" -j "$jobs" "$@"
  else
    ctest --preset "$preset" -j "$jobs"
  fi
done
