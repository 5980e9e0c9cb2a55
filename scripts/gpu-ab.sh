#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A/B benchmark on the GPU machine: this tree (A) against one or more other source
# trees (B, e.g. a commit exported with `git archive COMMIT | tar -x -C .ab/b`, carried
# to the machine), all built with the `default` instances, each benchmark run in
# alternating rounds (A B1 B2, B1 B2 A, B2 A B1, ...) so that clock and thermal drift
# and the position in a round fall on every side alike.
# Usage: scripts/gpu-ab.sh OUTDIR B_TREE[,B_TREE...] BENCH[:FILTER] [BENCH[:FILTER]...]
# Each tree builds the named benchmarks' targets only (all of it where its tests run);
# BENCH:FILTER runs that benchmark with --filter FILTER (KVINFER_AB_FILTER otherwise).
#   e.g. scripts/gpu-ab.sh out .ab/b1,.ab/b2 bench_decode bench_prefill
# Environment: KVINFER_AB_ROUNDS (2), KVINFER_AB_FILTER (a --filter for every benchmark),
# KVINFER_AB_TESTS=1 also runs the last B tree's GPU tests (ctest -L gpu), =all every B tree's.
# Writes OUTDIR/ab.md (per case: the medians of A and of each B, B/A), OUTDIR/ab.json
# (every run's rows) and OUTDIR/build.log (with each benchmark run's seconds).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[[ $# -ge 3 ]] || { echo "usage: $0 OUTDIR B_TREE[,B_TREE...] BENCH [BENCH...]" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
trees=("$PWD")  # side 0 is A
IFS=, read -ra b_args <<<"$2"
for b in "${b_args[@]}"; do trees+=("$(cd "$b" && pwd)") || exit 2; done
shift 2
benches=("$@")
rounds=${KVINFER_AB_ROUNDS:-2}
work=$(mktemp -d)
deps_args=()
[[ -d .deps ]] && deps_args=(-DKVINFER_DEPS_DIR="$PWD/.deps")

build() {  # build SRC DIR [all]: the named benchmarks of one tree, or everything (a side whose tests run)
  local src=$1 dir=$2 targets=(--target "${benches[@]%%:*}")
  [[ ${3:-} == all ]] && targets=()
  echo "== build $src -> $dir" >>"$out/build.log"
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINFER_CUDA=ON -DKVINFER_INSTANCES=default \
    "${deps_args[@]}" >>"$out/build.log" 2>&1 &&
    cmake --build "$dir" -j "$(nproc)" "${targets[@]}" -- -k 0 >>"$out/build.log" 2>&1
}
side_name() { (($1 == 0)) && echo a || echo "b$1"; }
tested() {  # whether side $1's GPU tests run (KVINFER_AB_TESTS)
  case ${KVINFER_AB_TESTS:-0} in
    1) (($1 == ${#trees[@]} - 1)) ;;
    all) (($1 >= 1)) ;;
    *) false ;;
  esac
}
for ((s = 0; s < ${#trees[@]}; ++s)); do
  what=""
  tested $s && what=all
  build "${trees[s]}" "${trees[s]}/build-gpu" $what || { echo "$(side_name $s) build failed"; tail -20 "$out/build.log"; }
done

if [[ ${KVINFER_AB_TESTS:-0} == 1 || ${KVINFER_AB_TESTS:-0} == all ]]; then
  first=$((${#trees[@]} - 1))
  [[ ${KVINFER_AB_TESTS} == all ]] && first=1
  for ((s = first; s < ${#trees[@]}; ++s)); do
    name=$(side_name $s)
    ctest --test-dir "${trees[s]}/build-gpu" -L gpu -j 8 --timeout 120 >"$work/tests-$name.log" 2>&1
    echo "$name GPU tests: rc $? ($(grep -E 'tests passed|tests failed' "$work/tests-$name.log"))" | tee -a "$out/build.log"
    grep -E '\(Failed\)|\(Timeout\)|\*\*\*' "$work/tests-$name.log" | tee -a "$out/build.log"
    # The failures' own output, for the record.
    if grep -qE '\(Failed\)|\(Timeout\)' "$work/tests-$name.log"; then
      ctest --test-dir "${trees[s]}/build-gpu" -L gpu --rerun-failed --output-on-failure >"$out/tests-failed-$name.log" 2>&1
    fi
  done
fi

filter=()
[[ -n ${KVINFER_AB_FILTER:-} ]] && filter=(--filter "$KVINFER_AB_FILTER")
# The table, rewritten after every benchmark (a run cut short keeps what it measured).
summarize() {
  python3 - "$work" "$out" <<'PY'
import glob, json, os, statistics, sys
work, out = sys.argv[1], sys.argv[2]
runs = {}  # (bench, side) -> list of row lists
for path in sorted(glob.glob(os.path.join(work, "*.json"))):
    bench, side, _ = os.path.basename(path)[:-5].rsplit(".", 2)
    try:
        runs.setdefault((bench, side), []).append(json.load(open(path))["rows"])
    except Exception as e:
        print(f"{path}: {e}")
# A case is a row's string-valued fields (name, wrapper, kernel, dtype, ...).
key = lambda row: " | ".join(str(v) for k, v in row.items() if isinstance(v, str))
sides = sorted({s for _, s in runs}, key=lambda s: (s != "a", len(s), s))
bs = [s for s in sides if s != "a"]
lines = ["| bench | case | A µs | " + " | ".join(f"{s.upper()} µs | {s.upper()} / A" for s in bs) + " |",
         "|---|---|---|" + "---|---|" * len(bs)]
for bench in sorted({b for b, _ in runs}):
    med = {}
    for side in sides:
        times = {}
        for rows in runs.get((bench, side), []):
            for row in rows:
                for field, value in row.items():  # median_us, or plain_us and cascade_us
                    if field.endswith("_us") and not field.startswith(("p10", "p90", "min")):
                        times.setdefault(f"{key(row)} | {field}", []).append(value)
        med[side] = {k: statistics.median(v) for k, v in times.items()}
    for case, a in med.get("a", {}).items():
        cells = []
        for side in bs:
            b = med[side].get(case)
            cells.append("- | -" if b is None else f"{b:.2f} | {b / a:.3f}")
        lines.append(f"| {bench} | {case} | {a:.2f} | " + " | ".join(cells) + " |")
open(os.path.join(out, "ab.md"), "w").write("\n".join(lines) + "\n")
json.dump({f"{b}.{s}": r for (b, s), r in runs.items()}, open(os.path.join(out, "ab.json"), "w"))
PY
}

for bench_arg in "${benches[@]}"; do
  bench=${bench_arg%%:*}
  bench_filter=("${filter[@]}")
  [[ $bench_arg == *:* ]] && bench_filter=(--filter "${bench_arg#*:}")
  for ((round = 1; round <= rounds; ++round)); do
    for ((k = 0; k < ${#trees[@]}; ++k)); do
      # Round r starts at side r-1: with as many rounds as sides, each side runs first
      # once (the first run after a build or another benchmark can be the slow one).
      s=$(((k + round - 1) % ${#trees[@]}))
      side=$(side_name $s)
      start=$SECONDS
      timeout 300 "${trees[s]}/build-gpu/bench/$bench" "${bench_filter[@]}" --json "$work/$bench.$side.$round.json" \
        >/dev/null 2>&1 || echo "$bench ($side, round $round) failed" | tee -a "$out/build.log"
      echo "$bench ($side, round $round): $((SECONDS - start)) s" >>"$out/build.log"
    done
  done
  summarize
done
cat "$out/ab.md"

