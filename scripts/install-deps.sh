#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what kvinfer needs to build and test: Debian's packages for the C++ build,
# PyPI's (pip) for the Python package (python/).
# Idempotent: does nothing when everything is present.
set -euo pipefail

# clang and libclang-rt-dev (compiler-rt for Debian's default clang: the ASan, UBSan
# and TSan runtimes and libFuzzer) are for scripts/sanitize.sh and scripts/fuzz.sh.
packages=(cmake ninja-build g++ libgtest-dev libgmock-dev googletest libbenchmark-dev
          libfmt-dev libcli11-dev nlohmann-json3-dev clang libclang-rt-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Python package: nanobind (bindings), scikit-build-core (`pip install .`), numpy,
# pytest and ml_dtypes (bf16 / fp8 numpy arrays in the tests), pinned.
python_packages=(nanobind==3.1.0 scikit-build-core==1.1.2 numpy==2.4.6 pytest==9.2.0 ml_dtypes==0.7.0)
if ! python3 - "${python_packages[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
  echo "install-deps: pip installing ${python_packages[*]}"
  python3 -m pip install -q --disable-pip-version-check "${python_packages[@]}"
fi
