#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copies what the build needs from this machine's Debian packages into .deps/ (ignored
# by git), for a machine that has none of them and cannot download (the GPU machine):
# GoogleTest's source (built there), and the headers of fmt (used header-only), CLI11
# and nlohmann-json. CMake picks .deps/ up for any package it does not find
# (cmake/KvinferDeps.cmake). Carry it with the tree: run(carry: [".deps"]).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps

need() {
  [[ -e $1 ]] || { echo "stage-deps: $1 is missing (run scripts/install-deps.sh)" >&2; exit 1; }
}
need /usr/src/googletest/CMakeLists.txt
need /usr/include/fmt/format.h
need /usr/include/CLI/CLI.hpp
need /usr/include/nlohmann/json.hpp

rm -rf "$dest"
mkdir -p "$dest/include"
# googlemock is not used; googletest's top-level CMakeLists only adds it with BUILD_GMOCK.
cp -r /usr/src/googletest "$dest/googletest"
rm -rf "$dest/googletest/googlemock/test" "$dest/googletest/googletest/test" "$dest/googletest/googletest/samples"
cp -r /usr/include/fmt /usr/include/CLI /usr/include/nlohmann "$dest/include/"

{
  echo "# Staged by scripts/stage-deps.sh on $(date -u +%F) from:"
  dpkg-query -W -f='${Package} ${Version}\n' googletest libfmt-dev libcli11-dev nlohmann-json3-dev 2>/dev/null || true
} >"$dest/VERSIONS"
echo "stage-deps: $(du -sh "$dest" | cut -f1) in $dest"
