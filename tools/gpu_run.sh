#!/usr/bin/env bash
# One batch on a GPU machine (used with the device tool; see tools/README.md): build, then the
# stages named on the command line, each under a time limit, logs under $OUT (or build/gpu-logs).
#   tools/gpu_run.sh build ipc harness sweep iree perf topo torch
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WEFT_BUILD:-$here/build-gpu}"
logs="${OUT:-$build/gpu-logs}"
mkdir -p "$logs"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH="/usr/local/cuda/bin:$PATH"
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
nccl_dir=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
summary=()
stage() {  # stage NAME SECONDS CMD...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "=== $name: $*" | tee -a "$logs/$name.log"
  timeout -k 10 "$limit" "$@" >> "$logs/$name.log" 2>&1
  local rc=$?
  summary+=("$name rc=$rc $((SECONDS - t0))s")
  tail -n 25 "$logs/$name.log"
}
for s in "$@"; do
  case "$s" in
    build)
      stage configure 120 cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA_ARCHS=90
      stage build 480 cmake --build "$build" -j"$(nproc)" --target weft_shared weft_kernel_harness weft_gpu_ipc_test \
        coll_sweep iree_style_test weft-perf weft-topo ;;
    ipc) stage ipc 120 "$build/tests/gpu/weft_gpu_ipc_test" ;;
    harness) stage harness 240 "$build/tests/gpu/weft_kernel_harness" --mode all --quick ;;
    harness-bw) stage harness-bw 240 "$build/tests/gpu/weft_kernel_harness" --mode bandwidth ;;
    sweep) stage sweep 300 "$build/tests/gpu/coll_sweep" -g "$ngpus" -m threads --quick ;;
    sweep-all) stage sweep-all 540 "$build/tests/gpu/coll_sweep" -g "$ngpus" -m all --quick ;;
    iree) stage iree 120 "$build/tests/gpu/iree_style_test" -g "$ngpus" ;;
    perf)
      for op in all_reduce all_gather reduce_scatter broadcast reduce sendrecv alltoall; do
        stage "perf-$op" 200 python3 "$here/tools/compare.py" --weft-lib "$build" --nccl-lib "$nccl_dir" \
          --perf "$build/tools/weft-perf" --ops "$op" -g "$ngpus" -b 64M -e 2G -f 2 -c 0 --json "$logs/perf-$op.json"
      done ;;
    perf-small) stage perf-small 200 python3 "$here/tools/compare.py" --weft-lib "$build" --nccl-lib "$nccl_dir" \
          --perf "$build/tools/weft-perf" --ops all_reduce -g "$ngpus" -b 8 -e 64M -f 4 -c 1 --json "$logs/perf-small.json" ;;
    topo)
      stage topo 60 "$build/bin/weft-topo" --dump-xml "$logs/weft_topo.xml"
      NCCL_TOPO_DUMP_FILE="$logs/nccl_topo.xml" LD_LIBRARY_PATH="$nccl_dir" timeout 60 "$build/tools/weft-perf" \
        all_reduce -g "$ngpus" -b 8 -e 8 >> "$logs/topo.log" 2>&1 ;;
    torch) stage torch 240 python3 "$here/tests/gpu/torch_dist_test.py" --lib "$build/libnccl.so.2" --expect-weft ;;
    *) echo "unknown stage $s" ;;
  esac
done
echo "=== summary"; printf '%s\n' "${summary[@]}"
