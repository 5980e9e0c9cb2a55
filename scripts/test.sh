#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The tests on a fresh machine: install what is missing, build, run every test
# except the `slow` label (pass -L slow to run only those).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${KVINFER_BUILD_DIR:-build}"
args=("$@")
((${#args[@]})) || args=(-LE slow)
ctest --output-on-failure -j "${KVINFER_JOBS:-$(nproc)}" "${args[@]}"
