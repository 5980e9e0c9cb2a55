#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stage a carryable FlashInfer bundle for the (offline) GPU machine into
# <repo>/.deps/flashinfer: FlashInfer's Python package, stripped, with the JIT
# modules peer_flashinfer.py needs pre-built for sm_90a, plus apache-tvm-ffi,
# packed as one .tar.xz that fi_bundle.py unpacks there.  Idempotent: every
# step is skipped or a no-op when its result is already there.
#
#   bash bench/flashinfer/stage.sh            # full run
#   FI_PREFILL_BACKENDS=fa2 bash ...          # prebuild fa2 only (skip fa3)
#   FI_FA3_HEAD_DIMS=128 bash ...             # fa3 for head_dim 128 only (fa3 builds are slow)
#   FI_SKIP_BUILD=1 bash ...                  # only (re)assemble from what is built
#
# Heavy steps run under nice -n 19 with one compile job (the staging machine
# is small and shared).  Needs: python3.12 (the GPU machine's Python is 3.12),
# nvcc 13 in /usr/local/cuda, PyPI access.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
STAGE="${FI_STAGE:-/work/fi-stage}"
DEST="${FI_DEST:-$REPO/.deps/flashinfer}"
FI_VERSION="${FI_VERSION:-0.7.4}"
TVM_FFI_VERSION="${TVM_FFI_VERSION:-0.1.15.post2}"
TORCH_VERSION="${TORCH_VERSION:-2.11.0}"
export FI_PREFILL_BACKENDS="${FI_PREFILL_BACKENDS:-fa2 fa3}"
export FI_PREFILL_HEAD_DIMS="${FI_PREFILL_HEAD_DIMS:-64 128 256}"   # fa2 (~7.5 min each here)
export FI_FA3_HEAD_DIMS="${FI_FA3_HEAD_DIMS:-64 128 256}"           # fa3 (~20 min each here)
NICE="nice -n 19"

log() { printf '[stage %s] %s\n' "$(date +%T)" "$*"; }

PY312="${FI_PYTHON:-}"
if [[ -z "$PY312" ]]; then
  for c in python3.12 /root/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
    if p="$(command -v "$c" 2>/dev/null)" && "$p" -c 'import sys; assert sys.version_info[:2]==(3,12)' 2>/dev/null; then
      PY312="$p"; break
    fi
  done
fi
[[ -n "$PY312" ]] || { echo "stage.sh: need a python3.12 (set FI_PYTHON)" >&2; exit 1; }
mkdir -p "$STAGE"/{dl,ws} "$DEST"

# 1. build venv: torch (import-time need of flashinfer; CPU use only), tvm-ffi, jinja2, ninja.
VENV="$STAGE/venv312"
if [[ ! -f "$VENV/.ok-$TORCH_VERSION-$TVM_FFI_VERSION" ]]; then
  log "creating build venv $VENV"
  [[ -x "$VENV/bin/python" ]] || "$PY312" -m venv "$VENV"
  $NICE "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "torch==$TORCH_VERSION" "apache-tvm-ffi==$TVM_FFI_VERSION" numpy einops requests tabulate \
    click tqdm packaging nvidia-ml-py cuda-bindings ninja jinja2 filelock
  touch "$VENV/.ok-$TORCH_VERSION-$TVM_FFI_VERSION"
fi
PY="$VENV/bin/python"

# 2. downloads (PyPI, no deps)
FI_WHL="$(ls "$STAGE"/dl/flashinfer_python-"$FI_VERSION"-*.whl 2>/dev/null | head -1 || true)"
if [[ -z "$FI_WHL" ]]; then
  log "downloading flashinfer-python==$FI_VERSION"
  $NICE "$PY" -m pip download -q --disable-pip-version-check --no-deps "flashinfer-python==$FI_VERSION" -d "$STAGE/dl"
  FI_WHL="$(ls "$STAGE"/dl/flashinfer_python-"$FI_VERSION"-*.whl | head -1)"
fi
TVM_WHL="$(ls "$STAGE"/dl/apache_tvm_ffi-"$TVM_FFI_VERSION"-cp312-*.whl 2>/dev/null | head -1 || true)"
if [[ -z "$TVM_WHL" ]]; then
  log "downloading apache-tvm-ffi==$TVM_FFI_VERSION (cp312 manylinux x86_64)"
  $NICE "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    "apache-tvm-ffi==$TVM_FFI_VERSION" -d "$STAGE/dl"
  TVM_WHL="$(ls "$STAGE"/dl/apache_tvm_ffi-"$TVM_FFI_VERSION"-cp312-*.whl | head -1)"
fi

# 3. unpack the full wheel (used for building; the bundle is a stripped copy)
SRC="$STAGE/whl"
if [[ ! -f "$SRC/.ok-$FI_VERSION" && -f "$SRC/flashinfer_python-$FI_VERSION.dist-info/RECORD" && -f "$SRC/flashinfer/__init__.py" ]]; then
  touch "$SRC/.ok-$FI_VERSION"  # unpacked by an earlier run that stopped before its marker
fi
if [[ ! -f "$SRC/.ok-$FI_VERSION" ]]; then
  log "unpacking $(basename "$FI_WHL")"
  rm -rf "$SRC"; mkdir -p "$SRC"
  (cd "$SRC" && $NICE unzip -q "$FI_WHL")
  touch "$SRC/.ok-$FI_VERSION"
fi

# 4. prebuild the JIT modules (ninja: a no-op for modules already built)
export PYTHONPATH="$SRC"
export FLASHINFER_WORKSPACE_BASE="$STAGE/ws"
export FLASHINFER_CUDA_ARCH_LIST="9.0a" TORCH_CUDA_ARCH_LIST="9.0a"
export MAX_JOBS=1 FLASHINFER_JIT_PREBUILD_MAX_JOBS=1 FLASHINFER_NVCC_THREADS=1
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
PREBUILD="$HERE/prebuild.py"
if [[ -z "${FI_SKIP_BUILD:-}" ]]; then
  (cd "$STAGE" && $NICE "$PY" "$PREBUILD" list)
  mapfile -t MODS < <(cd "$STAGE" && "$PY" "$PREBUILD" list 2>/dev/null | cut -f1)
  for m in "${MODS[@]}"; do
    log "prebuild $m"
    (cd "$STAGE" && $NICE "$PY" "$PREBUILD" build "$m") || log "BUILD FAILED: $m (bundle will lack it; GPU side would JIT it)"
  done
fi

# 5. assemble the stripped tree
B="$STAGE/bundle"
rm -rf "$B"; mkdir -p "$B/site"
log "assembling stripped tree in $B"
# flashinfer: all .py (import-time and lazily-imported code; they compress well) and
# package data files, minus kernel sources of ops the bench does not use.
(cd "$SRC" && tar cf - \
   --exclude='flashinfer/data/csrc/*/*' \
   --exclude='flashinfer/data/cutlass/docs' --exclude='flashinfer/data/cutlass/examples' \
   --exclude='flashinfer/data/cutlass/test' --exclude='flashinfer/data/cutlass/python' \
   --exclude='flashinfer/data/cutlass/media' --exclude='flashinfer/data/cutlass/tools/library' \
   --exclude='flashinfer/data/cutlass/tools/profiler' \
   --exclude='flashinfer/data/build_backend.py' --exclude='flashinfer/data/build_utils.py' \
   --exclude='*.cu' --exclude='__pycache__' \
   flashinfer flashinfer_python-"$FI_VERSION".dist-info) | (cd "$B/site" && tar xf -)
# keep the top-level csrc .cu files (JIT templates/host code for fa2/fa3/decode, read at plan time)
(cd "$SRC/flashinfer/data/csrc" && find . -maxdepth 1 -type f -name '*.cu' -print0 | xargs -0 -I{} cp {} "$B/site/flashinfer/data/csrc/")
# kernel-source dirs under package subpackages are gone (.cu excluded); drop now-empty csrc dirs
find "$B/site/flashinfer" -depth -type d -empty -delete
rm -f "$B/site/flashinfer_python-$FI_VERSION.dist-info/RECORD"
# prebuilt modules -> flashinfer/data/aot/<uri>/<uri>.so (FlashInfer's own AOT lookup path)
(cd "$STAGE" && "$PY" "$PREBUILD" install "$B/site/flashinfer/data/aot") || log "some modules not prebuilt (see above)"
# apache-tvm-ffi (cp312): runtime lib + python package; keep headers (needed if the GPU side JITs)
(cd "$B/site" && unzip -q -o "$TVM_WHL" && rm -rf tvm_ffi/src tvm_ffi/cython \
   && rm -f apache_tvm_ffi-*.dist-info/RECORD && find . -name '__pycache__' -prune -exec rm -rf {} +)

# 6. pack
ARCH="flashinfer-$FI_VERSION-sm90a-cp312.tar.xz"
log "packing $ARCH (xz -9, one thread)"
rm -f "$DEST"/*.tar.xz "$DEST/BUNDLE.txt"
(cd "$B" && tar --sort=name --mtime='2026-01-01' --owner=0 --group=0 --numeric-owner -cf - site \
   | $NICE xz -9 -T1 > "$DEST/$ARCH.tmp") && mv "$DEST/$ARCH.tmp" "$DEST/$ARCH"
{
  echo "archive: $ARCH"
  echo "sha256: $(sha256sum "$DEST/$ARCH" | cut -d' ' -f1)"
  echo "flashinfer-python: $FI_VERSION   apache-tvm-ffi: $TVM_FFI_VERSION (cp312)   built with torch $TORCH_VERSION (cpu use only), $("$CUDA_HOME/bin/nvcc" --version | tail -1)"
  echo "python: 3.12 only (tvm_ffi/core is a cp312 extension)"
  echo "arch: sm_90a (FLASHINFER_CUDA_ARCH_LIST=9.0a)"
  echo "unpacked bytes: $(du -sb "$B/site" | cut -f1)"
  echo "prebuilt modules (site/flashinfer/data/aot):"
  (cd "$B/site/flashinfer/data/aot" 2>/dev/null && for f in */*.so; do printf '  %s %s\n' "$(stat -c %s "$f")" "$(dirname "$f")"; done)
} > "$DEST/BUNDLE.txt"
cat "$DEST/BUNDLE.txt"
log "bundle: $(du -sb "$DEST" | cut -f1) bytes in $DEST ($(du -sh "$DEST" | cut -f1)); all of .deps: $(du -sh "$REPO/.deps" | cut -f1)"
