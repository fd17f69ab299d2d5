#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages), builds weft (library, device code, unit tests, GPU test
# programs, tools) and, side by side, the HIP/ROCm variant (librccl.so.1 for gfx90a and gfx940, compile
# only: no AMD GPU here) in <build-dir>-hip; then runs the unit tests, the fuzz targets (tools/fuzz.sh,
# WEFT_FUZZ_SECONDS each, default 10; 0 skips) and the HIP build's checks.
# Usage: tools/test.sh [build-dir]
# Environment: WEFT_SETUP_HIP=0 skips the HIP build. WEFT_TEST_HIP_ARCHS (e.g. gfx90a) compiles the
# HIP device code for those targets only, and WEFT_TEST_HIP_DEBUG=0 compiles it without -g: clang
# compiles the device code once per target, which made the HIP build most of CI's time.
# WEFT_TEST_HIP_FUNCTORS=sample builds the HIP kernels with a sample of the reduction functors
# (-DWEFT_DEVICE_FUNCTOR_SAMPLE=ON, device/functor_sample.h): a compile check, about a fifth of
# the device-compile time. WEFT_TEST_DEBUG=0 drops -g from the host code of both builds. .ci/run
# sets all four; by default the builds are the ones users get: both HIP targets, every functor,
# RelWithDebInfo.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"

# shellcheck source=tools/setup.sh
export WEFT_SETUP_HIP="${WEFT_SETUP_HIP:-1}"
source "$here/tools/setup.sh"

# WEFT_TEST_DEBUG=0 compiles host code (and nvcc's host side) without -g: ~30 % less compile time
# for the template-heavy emulation tests (direct_emu_test.cc: 130 -> 89 s), which CI pays on two cores.
host_flags="-O2 -g -DNDEBUG"  # CMake's RelWithDebInfo flags; the cache keeps -D values, so always pass them
if [ "${WEFT_TEST_DEBUG:-1}" = 0 ]; then host_flags="-O2 -DNDEBUG"; fi
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_TESTS=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$host_flags" "-DCMAKE_CUDA_FLAGS_RELWITHDEBINFO=$host_flags"

# The two builds run side by side: each spends minutes in one big device-code file on one core
# (nvcc on src/device/kernel.cu, clang on its HIP twin) while its other jobs are done, so together
# they keep the cores busy. The unit tests run after both, on an idle machine (some time out).
hip_pid=""
hip_built=0
# A failed CUDA build stops the HIP one. (errexit holds inside the trap too: every command must succeed.)
trap 'if [ -n "$hip_pid" ]; then pkill -TERM -P "$hip_pid" 2>/dev/null || true; kill "$hip_pid" 2>/dev/null || true; fi' EXIT
if [ "$WEFT_SETUP_HIP" = 1 ]; then
  hip_start=$SECONDS
  # The cache keeps -D values: pass the defaults too, so that a reused build folder gets what is asked.
  hip_flags="-O2 -g -DNDEBUG"  # CMake's RelWithDebInfo flags for HIP (host .cc files: host_flags)
  if [ "${WEFT_TEST_HIP_DEBUG:-1}" = 0 ]; then hip_flags="-O2 -DNDEBUG"; fi
  cmake -S "$here" -B "$build-hip" -G Ninja -DWEFT_GPU=HIP -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_TESTS=ON \
    "-DWEFT_HIP_ARCHS=${WEFT_TEST_HIP_ARCHS:-gfx90a;gfx940}" "-DCMAKE_HIP_FLAGS_RELWITHDEBINFO=$hip_flags" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$host_flags" \
    "-DWEFT_DEVICE_FUNCTOR_SAMPLE=$([ "${WEFT_TEST_HIP_FUNCTORS:-all}" = sample ] && echo ON || echo OFF)"
  hip_log="$build-hip/weft-build.log"
  cmake --build "$build-hip" -j"$(nproc)" > "$hip_log" 2>&1 &
  hip_pid=$!
fi
build_start=$SECONDS
cmake --build "$build" -j"$(nproc)"
echo "weft: CUDA build took $((SECONDS - build_start)) s"
if [ -n "$hip_pid" ]; then
  hip_status=0
  wait "$hip_pid" || hip_status=$?
  hip_pid=""
  if [ "$hip_status" != 0 ]; then
    echo "weft: the HIP build failed; the end of its log ($hip_log):" >&2
    tail -n 60 "$hip_log" >&2
    exit 1
  fi
  hip_built=1
  echo "weft: HIP build done $((SECONDS - hip_start)) s after it started (log: $hip_log)"
fi
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 600)
# The parsers of outside bytes under libFuzzer + ASan + UBSan (WEFT_FUZZ_SECONDS per target; 0 skips).
if [ "${WEFT_FUZZ_SECONDS:-10}" != 0 ]; then
  fuzz_start=$SECONDS
  bash "$here/tools/fuzz.sh" "$build" "${WEFT_FUZZ_SECONDS:-10}"
  echo "weft: fuzzing took $((SECONDS - fuzz_start)) s"
fi
if [ "$hip_built" = 1 ]; then
  (cd "$build-hip" && ctest --output-on-failure -j"$(nproc)" --timeout 600)
  echo "weft: HIP build and checks took $((SECONDS - hip_start)) s"
fi
