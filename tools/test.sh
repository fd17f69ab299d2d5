#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages), builds weft (library, device code, unit tests, GPU test
# programs, tools) and runs the unit tests. Usage: tools/test.sh [build-dir]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"

# shellcheck source=tools/setup.sh
source "$here/tools/setup.sh"

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_TESTS=ON
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600
