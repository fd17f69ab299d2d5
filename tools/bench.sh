#!/usr/bin/env bash
# Builds weft and runs the benchmark (tools/weft-perf) on this machine's GPUs: every collective from
# 8 B to 1 GiB, one thread driving all local GPUs. Without a GPU it says so and exits non-zero.
# Usage: tools/bench.sh [build-dir]; set WEFT_BENCH_ARGS to pass other weft-perf options.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "weft bench: no NVIDIA GPU found on this machine (nvidia-smi sees none); the benchmark needs at least one GPU." >&2
  exit 2
fi
ngpus=$(nvidia-smi -L | grep -c '^GPU')

# shellcheck source=tools/setup.sh
source "$here/tools/setup.sh"
# NVLink multicast stays off: on shared machines it can take GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA_ARCHS=native >/dev/null
cmake --build "$build" -j"$(nproc)" --target weft-perf
perf="$build/tools/weft-perf"
export LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for op in all_reduce all_gather reduce_scatter broadcast reduce sendrecv alltoall; do
  echo "### $op on $ngpus GPU(s)"
  "$perf" "$op" -b 8 -e 1G -f 4 -g "$ngpus" -c 1 ${WEFT_BENCH_ARGS:-}
done
