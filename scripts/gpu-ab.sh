#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A/B benchmark on the GPU machine: this tree (A) against another source tree (B, e.g.
# a branch exported with `git archive BRANCH | tar -x -C .ab/b`, carried to the machine),
# both built with the `default` instances, each benchmark run in alternating rounds
# (A B A B ...) so that clock and thermal drift fall on both sides alike.
# Usage: scripts/gpu-ab.sh OUTDIR B_TREE BENCH [BENCH...]
#   e.g. scripts/gpu-ab.sh out .ab/b bench_decode bench_prefill
# Environment: KVINFER_AB_ROUNDS (2), KVINFER_AB_FILTER (a --filter for every benchmark),
# KVINFER_AB_TESTS=1 also runs B's GPU tests (ctest -L gpu).
# Writes OUTDIR/ab.md (per case: A and B medians, B/A), OUTDIR/ab.json (every run's
# rows) and OUTDIR/build.log.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[[ $# -ge 3 ]] || { echo "usage: $0 OUTDIR B_TREE BENCH [BENCH...]" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
b_tree=$(cd "$2" && pwd) || exit 2
shift 2
benches=("$@")
rounds=${KVINFER_AB_ROUNDS:-2}
work=$(mktemp -d)
deps_args=()
[[ -d .deps ]] && deps_args=(-DKVINFER_DEPS_DIR="$PWD/.deps")

build() {  # build SRC DIR: the benchmarks (and B's tests) of one tree
  local src=$1 dir=$2
  echo "== build $src -> $dir" >>"$out/build.log"
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINFER_CUDA=ON -DKVINFER_INSTANCES=default \
    "${deps_args[@]}" >>"$out/build.log" 2>&1 &&
    cmake --build "$dir" -j "$(nproc)" -- -k 0 >>"$out/build.log" 2>&1
}
build "$PWD" "$PWD/build-gpu" || { echo "A build failed"; tail -20 "$out/build.log"; }
build "$b_tree" "$b_tree/build-gpu" || { echo "B build failed"; tail -20 "$out/build.log"; }

if [[ ${KVINFER_AB_TESTS:-0} == 1 ]]; then
  ctest --test-dir "$b_tree/build-gpu" -L gpu -j 8 --timeout 120 >"$work/tests-b.log" 2>&1
  echo "B GPU tests: rc $? ($(grep -E 'tests passed|tests failed' "$work/tests-b.log"))" | tee -a "$out/build.log"
fi

filter=()
[[ -n ${KVINFER_AB_FILTER:-} ]] && filter=(--filter "$KVINFER_AB_FILTER")
for bench in "${benches[@]}"; do
  for ((round = 1; round <= rounds; ++round)); do
    for side in a b; do
      dir=$PWD/build-gpu
      [[ $side == b ]] && dir=$b_tree/build-gpu
      timeout 300 "$dir/bench/$bench" "${filter[@]}" --json "$work/$bench.$side.$round.json" >/dev/null 2>&1 ||
        echo "$bench ($side, round $round) failed" | tee -a "$out/build.log"
    done
  done
done

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
lines = ["| bench | case | A µs | B µs | B / A |", "|---|---|---|---|---|"]
for bench in sorted({b for b, _ in runs}):
    med = {}
    for side in ("a", "b"):
        times = {}
        for rows in runs.get((bench, side), []):
            for row in rows:
                for field, value in row.items():  # median_us, or plain_us and cascade_us
                    if field.endswith("_us") and not field.startswith(("p10", "p90", "min")):
                        times.setdefault(f"{key(row)} | {field}", []).append(value)
        med[side] = {k: statistics.median(v) for k, v in times.items()}
    for case, a in med["a"].items():
        b = med["b"].get(case)
        lines.append(f"| {bench} | {case} | {a:.2f} | {'-' if b is None else f'{b:.2f}'} | "
                     f"{'-' if b is None else f'{b / a:.3f}'} |")
open(os.path.join(out, "ab.md"), "w").write("\n".join(lines) + "\n")
json.dump({f"{b}.{s}": r for (b, s), r in runs.items()}, open(os.path.join(out, "ab.json"), "w"))
print("\n".join(lines))
PY
