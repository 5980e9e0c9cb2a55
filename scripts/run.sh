#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job on a fresh machine: install what is missing, build, run (by default
# `kvinfer serve`, the serving simulation; arguments replace it, e.g. `info`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec "${KVINFER_BUILD_DIR:-build}/kvinfer" "${@:-serve}"
