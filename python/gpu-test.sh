#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package on the GPU machine: builds the extension module in the GPU build
# (KVINFER_BUILD_DIR, default build-gpu, configured with KVINFER_BUILD_PYTHON=ON so that
# the library is position-independent: run scripts/gpu-check.sh with
# KVINFER_CMAKE_ARGS=-DKVINFER_BUILD_PYTHON=ON first, or let this configure it), then
# runs and writes into OUTDIR:
#   pytest.log, pytest.xml   every test of tests/python (torch CUDA tensors, CUDA graphs,
#                            streams, torch.compile, FlashInfer differential); fails when
#                            the GPU cases were skipped
#   bench_host.json/.log     bench/python/bench_host.py (host cost of plan + 32 runs)
#   llama.json/.log          examples/python/llama_paged.py (32 tokens through the paged cache)
# and fails on a failed test or example, skipped GPU cases, or a nanobind leak report at exit.
# Needs .deps/python (python/stage-deps.sh) where nanobind / pytest / Python headers are
# missing, and .deps/flashinfer (bench/flashinfer/stage.sh) for the FlashInfer rows.
# Usage: python/gpu-test.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
build=${KVINFER_BUILD_DIR:-build-gpu}
py=${KVINFER_PYTHON:-python3}
status=0
export PYTHONUNBUFFERED=1
[[ -d .deps/python ]] && export PYTHONPATH="$PWD/.deps/python${PYTHONPATH:+:$PYTHONPATH}"

deps_args=()
[[ -d .deps ]] && deps_args=(-DKVINFER_DEPS_DIR="$PWD/.deps")
echo "== gpu-test: configure $build (python $($py -c 'import sys; print(sys.version.split()[0])'))"
# shellcheck disable=SC2086  # KVINFER_CMAKE_ARGS is a list of words
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINFER_BUILD_PYTHON=ON \
  -DPython_EXECUTABLE="$(command -v "$py")" "${deps_args[@]}" ${KVINFER_CMAKE_ARGS:-} >"$out/build.log" 2>&1 \
  || { tail -30 "$out/build.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target kvinfer_python kvinfer_python_stub >>"$out/build.log" 2>&1 \
  || { tail -30 "$out/build.log"; exit 1; }
export PYTHONPATH="$PWD/$build/python:$PYTHONPATH"
$py -c "import kvinfer, torch; print('kvinfer', kvinfer.__version__, 'cuda backend', kvinfer.cuda_backend_built(),
      'instances', kvinfer.instance_preset(), 'torch', torch.__version__, 'gpus', torch.cuda.device_count())" \
  | tee "$out/env.log"

echo "== gpu-test: pytest"
$py -m pytest -q -rs -p no:cacheprovider --junitxml "$out/pytest.xml" tests/python 2>&1 | tee "$out/pytest.log"
rc=${PIPESTATUS[0]}
((rc == 0)) || status=1
# The GPU cases must have run: a skip of test_torch.py's CUDA cases (no GPU seen, a
# build without the CUDA backend) fails this check.
$py - "$out/pytest.xml" <<'PY' || status=1
import sys, xml.etree.ElementTree as ET
cases = [c for c in ET.parse(sys.argv[1]).getroot().iter("testcase") if "test_torch" in c.get("classname", "")]
skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
cuda = [c.get("name") for c in cases if "cuda" in c.get("name", "")]
print(f"gpu-test: test_torch.py ran {len(cases) - len(skipped)} cases ({len(cuda)} on cuda), skipped {skipped}")
sys.exit(1 if not cuda or skipped else 0)
PY

echo "== gpu-test: bench/python/bench_host.py"
$py bench/python/bench_host.py --json "$out/bench_host.json" >"$out/bench_host.log" 2>&1 || status=1
tail -12 "$out/bench_host.log"
echo "== gpu-test: examples/python/llama_paged.py"
$py examples/python/llama_paged.py --json "$out/llama.json" >"$out/llama.log" 2>&1 || status=1
tail -2 "$out/llama.log"
# nanobind reports the kvinfer objects still alive when the interpreter exits (a
# reference kept past the end of a test or the example): a failure here.
for log in "$out/pytest.log" "$out/llama.log"; do
  if grep -q "nanobind: leaked" "$log"; then
    echo "gpu-test: nanobind reported leaked objects at exit in $(basename "$log"):"
    grep -A3 "nanobind: leaked" "$log" | head -12
    status=1
  fi
done
exit $status
