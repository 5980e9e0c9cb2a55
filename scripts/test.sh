#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The tests on a fresh machine: install what is missing, build, run every test
# except the `slow` label (pass -L slow to run only those), then the Python package's
# tests (tests/python) against the extension module of the same build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The Python extension is a target of the same build: it links the library built for
# the C++ tests (KVINFER_BUILD_PYTHON=OFF in KVINFER_CMAKE_ARGS leaves it out).
export KVINFER_CMAKE_ARGS="-DKVINFER_BUILD_PYTHON=ON ${KVINFER_CMAKE_ARGS:-}"
scripts/build.sh
root=$PWD
cd "${KVINFER_BUILD_DIR:-build}"
args=("$@")
((${#args[@]})) || args=(-LE slow)
log=$(mktemp)
set +e
ctest --output-on-failure -j "${KVINFER_JOBS:-$(nproc)}" "${args[@]}" | tee "$log"
ctest_rc=${PIPESTATUS[0]}
set -e
# What ctest's summary counts as passed includes skipped tests: say how many and why.
skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)' "$log" || true)
if ((skipped > 0)); then
  reason="the GPU tests, without a CUDA device here; scripts/gpu-check.sh runs them on a GPU"
  nvidia-smi -L >/dev/null 2>&1 && reason="see the list above"
  echo "skipped: $skipped tests ($reason)"
fi
rm -f "$log"
((ctest_rc == 0)) || exit "$ctest_rc"
if grep -q "^KVINFER_BUILD_PYTHON:BOOL=ON" CMakeCache.txt; then
  # Any non-zero status fails the script, 5 (no test collected) included.
  PYTHONPATH="$PWD/python" python3 -m pytest -q -p no:cacheprovider "$root/tests/python"
fi
