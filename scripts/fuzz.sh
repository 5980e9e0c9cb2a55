#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs each libFuzzer harness (tests/fuzz) for SECONDS (default 20) over its
# checked-in corpus, in the `asan` preset's build (ASan + UBSan; built here when
# missing). New inputs go to a scratch folder, never into the checked-in corpus; a
# crash leaves its input in build-asan/fuzz-artifacts/ and fails the script.
#   scripts/fuzz.sh [SECONDS] [NAME...]     NAME: attention, ops, trace (default all)
# Settings: KVINFER_JOBS (build jobs), KVINFER_FUZZ_FLAGS (extra libFuzzer flags).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
names=("$@")
((${#names[@]})) || names=(attention ops trace)
scripts/install-deps.sh
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
[[ -f build-asan/CMakeCache.txt ]] || cmake --preset asan >/dev/null
targets=()
for n in "${names[@]}"; do targets+=(--target "kvinfer_fuzz_$n"); done
cmake --build build-asan -j "${KVINFER_JOBS:-$(nproc)}" "${targets[@]}"

artifacts=build-asan/fuzz-artifacts
mkdir -p "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
for n in "${names[@]}"; do
  scratch=$(mktemp -d)
  log=$artifacts/$n.log
  set +e
  # shellcheck disable=SC2086  # KVINFER_FUZZ_FLAGS is a list of flags
  "build-asan/tests/fuzz/kvinfer_fuzz_$n" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$n-" ${KVINFER_FUZZ_FLAGS:-} \
    "$scratch" "tests/fuzz/corpus/$n" >"$log" 2>&1
  rc=$?
  set -e
  rm -rf "$scratch"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if ((rc == 0)); then
    echo "fuzz $n: ${execs:-?} executions in ${seconds}s, no finding"
  else
    echo "fuzz $n: FINDING (exit $rc) after ${execs:-?} executions; input in $artifacts/$n-*, log $log:"
    grep -E "ERROR|runtime error|terminate|SUMMARY|==[0-9]+==" "$log" | head -20 || tail -30 "$log"
    status=1
  fi
done
exit "$status"
