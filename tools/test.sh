#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages), builds weft (library, device code, unit tests, GPU test
# programs, tools) and runs the unit tests; then builds the HIP/ROCm variant (librccl.so.1 for gfx90a
# and gfx940, compile only: no AMD GPU here) in <build-dir>-hip and runs its checks.
# Usage: tools/test.sh [build-dir]    (WEFT_SETUP_HIP=0 skips the HIP build)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"

# shellcheck source=tools/setup.sh
export WEFT_SETUP_HIP="${WEFT_SETUP_HIP:-1}"
source "$here/tools/setup.sh"

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_TESTS=ON
cmake --build "$build" -j"$(nproc)"
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 600)

if [ "$WEFT_SETUP_HIP" = 1 ]; then
  hip_start=$SECONDS
  cmake -S "$here" -B "$build-hip" -G Ninja -DWEFT_GPU=HIP -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_TESTS=ON
  cmake --build "$build-hip" -j"$(nproc)"
  (cd "$build-hip" && ctest --output-on-failure -j"$(nproc)" --timeout 600)
  echo "weft: HIP build and checks took $((SECONDS - hip_start)) s"
fi
