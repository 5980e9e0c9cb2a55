#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one command of the GPU machine: configure + build the `default` instance preset
# with all cores, run the GPU tests (ctest -L gpu; fails if none ran), run
# compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on the GPU test binaries, run every
# benchmark, and write into OUTDIR (at most 8 files: the device tool returns no more):
#   summary.md    short markdown table of everything below
#   results.json  test counts, sanitizer results, every benchmark's JSON
#   build.log  tests.log  sanitizer.log  bench.log
# Usage: scripts/gpu-check.sh OUTDIR
# Benchmarks: every bench_* executable the build produced and every bench/*.py is run
# with --json PATH (bench_ceilings first); no list to edit when one is added. A
# benchmark that needs other arguments or more time gets one line in bench_args /
# bench_timeout below. Environment: KVINFER_BUILD_DIR (build-gpu), KVINFER_CMAKE_ARGS
# (extra configure arguments), KVINFER_SANITIZER_SHARDS (gtest shards per tool, all run
# at once: 3), KVINFER_SANITIZER_TOOLS (memcheck racecheck synccheck initcheck),
# KVINFER_SANITIZER_TIMEOUT (300 s per shard), KVINFER_SANITIZER_FILTER (a
# --gtest_filter for the runs under the sanitizer; every GPU test by default),
# KVINFER_BENCH_SKIP (space-separated benchmark names not to run),
# KVINFER_GPU_CHECK_SKIP (space-separated steps to skip:
# tests sanitizer bench), KVINFER_COMMIT (the commit to report, for a copy of a working
# tree whose git metadata is older than its files, as the GPU machine's is).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
build=${KVINFER_BUILD_DIR:-build-gpu}
work=$(mktemp -d)  # per-benchmark JSON, JUnit XML: merged into results.json
jobs=$(nproc)
skip=" ${KVINFER_GPU_CHECK_SKIP:-} "
status=0
export PYTHONUNBUFFERED=1  # bench/*.py output reaches the log as it is printed

declare -A bench_args=(
  # [bench_name]="--runs 50"
)
declare -A bench_timeout=(
  [bench_ceilings]=120
  [bench_prefill]=240
  [peer_prefill]=240
)
default_bench_timeout=120

note() { echo "== gpu-check: $*" | tee -a "$out/build.log"; }

# ---------------------------------------------------------------- device and build
{
  echo "date: $(date -u +%FT%TZ)"
  if [[ -n ${KVINFER_COMMIT:-} ]]; then
    echo "commit: $KVINFER_COMMIT (given)"
  else
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu \
    --format=csv 2>&1 || true
  nvcc --version 2>&1 | tail -1 || true
  cmake --version | head -1
} >"$out/build.log"
deps_args=()
[[ -d .deps ]] && deps_args=(-DKVINFER_DEPS_DIR="$PWD/.deps")
note "configure ($build, KVINFER_INSTANCES=default unless KVINFER_CMAKE_ARGS says otherwise, $jobs jobs)"
# shellcheck disable=SC2086  # KVINFER_CMAKE_ARGS is a list of words
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINFER_CUDA=ON -DKVINFER_INSTANCES=default \
    "${deps_args[@]}" ${KVINFER_CMAKE_ARGS:-} >>"$out/build.log" 2>&1; then
  note "configure FAILED"
  tail -40 "$out/build.log"
  exit 1
fi
note "instance preset: $(sed -n 's/^KVINFER_INSTANCES:STRING=//p' "$build/CMakeCache.txt")"
build_start=$SECONDS
# -k 0: one broken target (a benchmark being written) must not stop the others.
if cmake --build "$build" -j "$jobs" -- -k 0 >>"$out/build.log" 2>&1; then
  build_ok=true
else
  build_ok=false
  status=1
  note "build had errors (continuing with what was built):"
  grep -E "FAILED|error" "$out/build.log" | head -20
fi
note "build took $((SECONDS - build_start)) s"

# ---------------------------------------------------------------- GPU tests
tests_json='{"ran": 0, "skipped": 0, "failed": 0, "total": 0}'
if [[ $skip != *" tests "* ]]; then
  note "GPU tests (ctest -L gpu)"
  # Outside the sanitizers launches overlap as on any GPU: test_cuda_pdl.cpp then
  # requires that its programmatic launches really did.
  KVINFER_TEST_REQUIRE_PDL_OVERLAP=1 \
    ctest --test-dir "$build" -L gpu -j 8 --timeout 120 --output-on-failure --output-junit "$work/ctest-gpu.xml" \
    >"$out/tests.log" 2>&1
  ctest_rc=$?
  tests_json=$(python3 - "$work/ctest-gpu.xml" <<'PY'
import json, sys, xml.etree.ElementTree as ET
try:
    s = ET.parse(sys.argv[1]).getroot()
    total, failed, skipped = int(s.get("tests", 0)), int(s.get("failures", 0)), int(s.get("skipped", 0))
    failed_names = [t.get("name") for t in s.iter("testcase") if t.get("status") == "fail"]
except Exception as e:  # no XML: ctest found no tests or crashed
    total = failed = skipped = 0; failed_names = [f"(no JUnit output: {e})"]
print(json.dumps({"total": total, "ran": total - skipped, "skipped": skipped, "failed": failed,
                  "failed_names": failed_names[:50]}))
PY
)
  echo "$tests_json"
  ran=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ran"])' "$tests_json")
  if [[ $ctest_rc -ne 0 ]]; then status=1; note "GPU tests FAILED (ctest rc $ctest_rc)"; fi
  if [[ $ran -eq 0 ]]; then status=1; note "no GPU test ran (all skipped or none built)"; fi
fi

# ---------------------------------------------------------------- sanitizer
san_json='[]'
: >"$out/sanitizer.log"
sanitizer=$(command -v compute-sanitizer)
for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [[ -z $sanitizer && -x $candidate ]] && sanitizer=$candidate
done
if [[ $skip != *" sanitizer "* ]]; then
  if [[ -n $sanitizer ]]; then
    san_entries=()
    # The fast GPU binary only: the `slow` grid would take too long under the tools.
    # Each tool runs the tests in KVINFER_SANITIZER_SHARDS gtest shards at once (the
    # tools are bound by the host's cores, not the GPU): every GPU test under both tools
    # took 96 s on the H200 machine's 16 cores with 3 shards each, all six at once.
    bin="$build/tests/kvinfer_test_cuda"
    shards=${KVINFER_SANITIZER_SHARDS:-3}
    read -ra tools <<<"${KVINFER_SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}"
    if [[ -x $bin ]]; then
      start=$SECONDS
      note "compute-sanitizer ${tools[*]} on $(basename "$bin"), $shards shards each"
      declare -A pids=()
      for tool in "${tools[@]}"; do
        for ((i = 0; i < shards; ++i)); do
          GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "${KVINFER_SANITIZER_TIMEOUT:-300}" "$sanitizer" \
            --tool "$tool" --error-exitcode 86 "$bin" --gtest_brief=1 --gtest_filter="${KVINFER_SANITIZER_FILTER:-*}" \
            >"$work/sanitizer-$tool-$i.log" 2>&1 &
          pids[$tool-$i]=$!
        done
      done
      for tool in "${tools[@]}"; do
        errors=0 passed=0 rcs=""
        for ((i = 0; i < shards; ++i)); do
          wait "${pids[$tool-$i]}"
          rc=$?
          rcs+="${rcs:+ }$rc"
          log="$work/sanitizer-$tool-$i.log"
          cat "$log" >>"$out/sanitizer.log"
          # memcheck, synccheck, initcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK
          # SUMMARY: ... (N errors, M warnings)".
          e=$(grep -Eo "ERROR SUMMARY: [0-9]+ error|\([0-9]+ errors" "$log" | head -1 | grep -Eo "[0-9]+" || true)
          p=$(grep -Eo "PASSED  \] [0-9]+" "$log" | grep -Eo "[0-9]+$" || true)
          passed=$((passed + ${p:-0}))
          if [[ $rc -eq 124 ]]; then
            errors="timeout"
          elif [[ -z $e ]]; then
            [[ $errors == timeout ]] || errors="no summary (rc $rc)"
          elif [[ $errors =~ ^[0-9]+$ ]]; then
            errors=$((errors + e))
          fi
          [[ $rc -ne 0 ]] && status=1
        done
        note "$tool: errors $errors, tests passed under it $passed, exit codes $rcs"
        san_entries+=("{\"binary\": \"$(basename "$bin")\", \"tool\": \"$tool\", \"shards\": $shards, \"rc\": \"$rcs\", \"tests_passed\": $passed, \"errors\": \"$errors\", \"seconds\": $((SECONDS - start))}")
      done
    fi
    san_json="[$(IFS=,; echo "${san_entries[*]}")]"
  else
    note "compute-sanitizer not found"
    san_json='[{"tool": "none", "rc": -1, "errors": "compute-sanitizer not found"}]'
  fi
fi

# ---------------------------------------------------------------- benchmarks
: >"$out/bench.log"
bench_seq=0
run_bench() {  # name, command...
  local name=$1; shift
  local t=${bench_timeout[$name]:-$default_bench_timeout}
  note "bench $name"
  local start=$SECONDS
  # shellcheck disable=SC2086
  timeout "$t" "$@" --json "$work/bench-$name.json" ${bench_args[$name]:-} >>"$out/bench.log" 2>&1
  local rc=$?
  bench_seq=$((bench_seq + 1))  # the report keeps the order of the runs
  echo "{\"name\": \"$name\", \"rc\": $rc, \"seconds\": $((SECONDS - start)), \"json\": \"$work/bench-$name.json\"}" \
    >"$work/status-$(printf %03d $bench_seq)-$name"
  [[ $rc -ne 0 ]] && { status=1; note "bench $name rc $rc"; }
  return 0
}
if [[ $skip != *" bench "* ]]; then
  [[ -x $build/bench/bench_ceilings ]] && run_bench bench_ceilings "$build/bench/bench_ceilings"
  for exe in "$build"/bench/bench_*; do
    name=$(basename "$exe")
    [[ -f $exe && -x $exe && $name != bench_ceilings ]] || continue
    [[ " ${KVINFER_BENCH_SKIP:-} " == *" $name "* ]] && continue
    run_bench "$name" "$exe"
  done
  for py in bench/*.py; do
    [[ -f $py ]] || continue
    name=$(basename "$py" .py)
    [[ " ${KVINFER_BENCH_SKIP:-} " == *" $name "* ]] && continue
    run_bench "$name" python3 "$py"
  done
fi

# ---------------------------------------------------------------- report
python3 - "$out" "$work" "$build_ok" "$tests_json" "$san_json" "$status" <<'PY'
import glob, json, os, sys
out, work, build_ok, tests, san, status = sys.argv[1:7]
tests, san = json.loads(tests), json.loads(san)
benches = []
for st in sorted(glob.glob(os.path.join(work, "status-*"))):
    entry = json.load(open(st))
    try:
        entry["result"] = json.load(open(entry.pop("json")))
    except Exception as e:
        entry["result"] = None
        entry["error"] = f"no JSON: {e}"
    benches.append(entry)
head = open(os.path.join(out, "build.log")).read().splitlines()[:6]
run = {k: v for k, _, v in (line.partition(": ") for line in head[:2]) if k in ("date", "commit")}
run["log_head"] = head  # date, commit, nvidia-smi, nvcc: tools/perf/make_report.py reads them
res = {"run": run, "build_ok": build_ok == "true", "status": int(status), "gpu_tests": tests, "sanitizer": san,
       "benchmarks": benches}
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)

def fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 0.01 and v != 0 else f"{v:.2f}"
    return str(v)

md = ["# GPU check", ""]
md += ["```"] + head + ["```", ""]
md += [f"- build: {'ok' if res['build_ok'] else 'FAILED (partial)'}",
       f"- GPU tests: {tests.get('ran', 0)} ran, {tests.get('skipped', 0)} skipped, {tests.get('failed', 0)} failed"
       f" (of {tests.get('total', 0)})"]
for name in tests.get("failed_names", []):
    md.append(f"  - failed: {name}")
for s in san:
    md.append(f"- compute-sanitizer {s.get('tool')} {s.get('binary', '')}: rc {s.get('rc')}, errors {s.get('errors')}, "
              f"tests passed under it {s.get('tests_passed', '?')}")
md.append("")
for b in benches:
    r = b.get("result") or {}
    md.append(f"## {b['name']} (rc {b['rc']}, {b['seconds']} s)")
    if not r:
        md += [b.get("error", "no result"), ""]
        continue
    for k, c in (r.get("ceilings") or {}).items():
        if isinstance(c, dict):
            md.append(f"- {k}: {fmt(c.get('value', 0))} {c.get('unit', '')} ({c.get('detail', '')})")
        else:  # a plain figure (bench_cpu_attention's read of its bytes)
            md.append(f"- {k}: {fmt(c)}")
    rows = r.get("rows") or []
    cols = r.get("columns") or (list(rows[0].keys()) if rows else [])
    if rows:
        md += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        md += ["| " + " | ".join(fmt(row.get(c, "")) for c in cols) + " |" for row in rows]
    md.append("")
md.append(f"status: {'PASS' if int(status) == 0 else 'FAIL'}")
open(os.path.join(out, "summary.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
rm -rf "$work"
exit $status
