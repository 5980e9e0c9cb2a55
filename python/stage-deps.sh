#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stages what building and testing the Python package needs on a machine without
# network or Python headers (the GPU machine, Python 3.12) into .deps/python (ignored
# by git; carry it with the tree: run(carry: [".deps"])):
#   nanobind, pytest (pure Python) and ml_dtypes (a cp3XX wheel), pinned, from PyPI;
#   the headers of a local Python of that version (include/python3.X), used where the
#   target interpreter has none (python/CMakeLists.txt picks them up).
# Usage: python/stage-deps.sh [PYTHON_VERSION]   (default 3.12)
set -euo pipefail
cd "$(dirname "$0")/.."
ver=${1:-3.12}
dest=.deps/python
rm -rf "$dest"
mkdir -p "$dest/include"
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
platforms=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_28_x86_64)
python3 -m pip install -q --target "$dest" --no-compile --no-deps --python-version "$ver" --only-binary=:all: \
  "${platforms[@]}" nanobind==3.1.0 pytest==9.2.0 ml_dtypes==0.7.0
# pytest's own dependencies (pure Python); numpy is on the target machine (torch needs it).
python3 -m pip install -q --target "$dest" --no-compile --no-deps --upgrade \
  iniconfig==2.3.1 pluggy==1.7.0 packaging==26.4 pygments==2.20.0
headers=""
for c in /root/.pyenv/versions/"$ver"*/bin/python"$ver" /usr/bin/python"$ver" "python$ver"; do
  if p=$(command -v "$c" 2>/dev/null) && inc=$("$p" -c "import sysconfig; print(sysconfig.get_paths()['include'])") \
      && [[ -f $inc/Python.h ]]; then
    headers=$inc
    break
  fi
done
if [[ -n $headers ]]; then
  cp -r "$headers" "$dest/include/python$ver"
else
  echo "stage-deps: no local Python $ver with headers; the target must have its own (python$ver-dev)" >&2
fi
{
  echo "# Staged by python/stage-deps.sh on $(date -u +%F) for Python $ver"
  ls "$dest" | grep -E "dist-info$"
  echo "headers: ${headers:-none}"
} >"$dest/VERSIONS"
echo "stage-deps: $(du -sh "$dest" | cut -f1) in $dest"
