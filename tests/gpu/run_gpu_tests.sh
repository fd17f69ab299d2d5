#!/usr/bin/env bash
# Builds weft and runs the GPU test programs on this machine, then prints one PASS/FAIL table:
#   coll_sweep --host-check                    generator exactness, CPU only
#   coll_sweep -g G -m MODES  for G in --gpus  every collective/type/op, 4 driving modes, extras
#   iree_style_test -g G                       IREE-style C client, one process per GPU
#   torch_dist_test.py                         PyTorch torch.distributed with weft LD_PRELOADed (if torch imports)
#   settings_mismatch_test.py                  ranks started with different settings fail creation, named
#   weft_gpu_fault_test -n 3 -g G              a rank killed, stopped or skipping a call: errors named, abort, recovery
#   weft_gpu_memory_test -n max(G,2)           each communicator's reported memory against what the GPU lost
# With --ref, the same programs also run against another libnccl.so.2 (NVIDIA's NCCL) to validate the tests
# themselves: a FAIL there is a bug in the test, not in weft.
#
# Usage: tests/gpu/run_gpu_tests.sh [options]
#   --quick              coll_sweep --quick (all collectives, fewer types/ops/sizes)
#   --gpus "1 2"         rank counts to run (default: "1 2", capped at the GPUs present)
#   --modes LIST         coll_sweep modes (default: all = initall,groupinit,threads,procs)
#   --only LIST          subset of: host,sweep,iree,torch,mismatch,faults,memory (default: all)
#   --ref DIR|torch      also run against DIR/libnccl.so.2; "torch" = the NCCL of the installed PyTorch wheel
#   --ref-only           run only against --ref (validate the tests without weft)
#   --no-build           use the existing build
#   --build DIR          build directory (default: <repo>/build)
#   --sweep-args "..."   extra arguments for coll_sweep (e.g. "--colls AllReduce --types float")
# Logs go to $OUT/gpu-tests if OUT is set, else <build>/gpu-tests. Exit status 0 only if every step passed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$here/build"
quick=0 gpus="1 2" modes="all" only="host,sweep,iree,torch,mismatch,faults,memory" ref="" refOnly=0 doBuild=1 sweepArgs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --gpus) gpus="$2"; shift ;;
    --modes) modes="$2"; shift ;;
    --only) only="$2"; shift ;;
    --ref) ref="$2"; shift ;;
    --ref-only) refOnly=1 ;;
    --no-build) doBuild=0 ;;
    --build) build="$2"; shift ;;
    --sweep-args) sweepArgs="$2"; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "run_gpu_tests: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

# NVLink multicast stays off on the shared test machines (it can take GPUs out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

logs="${OUT:+$OUT/gpu-tests}"
logs="${logs:-$build/gpu-tests}"
mkdir -p "$logs"
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
  [ -x "$d/nvcc" ] && case ":$PATH:" in *":$d:"*) ;; *) export PATH="$d:$PATH" ;; esac
done

results=()   # "name|library|PASS/FAIL|seconds|log"
record() { results+=("$1|$2|$3|$4|$5"); }

if [ "$doBuild" = 1 ]; then
  echo "== build ($build)"
  t0=$SECONDS
  if cmake -S "$here" -B "$build" -G Ninja -DWEFT_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        >"$logs/build.log" 2>&1 &&
     cmake --build "$build" -j"$(nproc)" --target weft_shared coll_sweep iree_style_test weft_gpu_fault_test weft_gpu_memory_test >>"$logs/build.log" 2>&1; then
    record build weft PASS $((SECONDS - t0)) "$logs/build.log"
  else
    record build weft FAIL $((SECONDS - t0)) "$logs/build.log"
    tail -30 "$logs/build.log"
  fi
fi
sweep="$build/tests/gpu/coll_sweep"
iree="$build/tests/gpu/iree_style_test"
faults="$build/tests/gpu/weft_gpu_fault_test"
memory="$build/tests/gpu/weft_gpu_memory_test"
weftLib="$build/libnccl.so.2"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
ngpu=${ngpu:-0}
rankCounts=()
for g in $gpus; do
  if [ "$g" -le "$ngpu" ]; then rankCounts+=("$g"); else echo "== skipping -g $g: only $ngpu GPUs"; fi
done

if [ "${#rankCounts[@]}" = 0 ] && { want sweep || want iree || want torch; }; then
  record "GPUs present" - FAIL 0 "nvidia-smi -L lists $ngpu GPUs"
fi

if [ "$ref" = torch ]; then
  refDir="$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) or nvidia.nccl.__path__[0])" 2>/dev/null)/lib"
  ref="$refDir"
fi
if [ -n "$ref" ] && [ ! -e "$ref/libnccl.so.2" ]; then
  echo "run_gpu_tests: --ref: $ref/libnccl.so.2 not found" >&2
  record "reference library" "$ref" FAIL 0 -
  ref=""
fi
libs=()
[ "$refOnly" = 1 ] || libs+=(weft)
[ -n "$ref" ] && libs+=(ref)

# run NAME LIBRARY LOG CMD...: runs CMD with the library selected, records PASS/FAIL by exit status.
run() {
  local name="$1" lib="$2" log="$3"
  shift 3
  local t0=$SECONDS rc
  echo "== $name [$lib] -> $log"
  if [ "$lib" = ref ]; then
    LD_LIBRARY_PATH="$ref${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 1800 "$@" >"$log" 2>&1
  else
    timeout 1800 "$@" >"$log" 2>&1
  fi
  rc=$?
  grep -E "^(FAIL|== coll_sweep|coll_sweep[: ]|iree_style_test:|torch_dist_test|settings_mismatch_test|[0-9]+ of [0-9]+ scenarios)" "$log" | tail -20
  record "$name" "$lib" "$([ $rc = 0 ] && echo PASS || echo FAIL)" $((SECONDS - t0)) "$log"
}

# The library a coll_sweep log says it loaded must be the one we meant.
checkLoaded() {
  local log="$1" lib="$2" want
  want="$(readlink -f "$weftLib")"
  [ "$lib" = ref ] && want="$(readlink -f "$ref/libnccl.so.2")"
  local got
  got="$(sed -n 's/^coll_sweep: library \([^ ]*\) .*/\1/p' "$log" | head -1)"
  if [ -n "$got" ] && [ "$(readlink -f "$got")" != "$want" ]; then
    echo "   !! the sweep loaded $got, expected $want"
    record "library check ($(basename "$log"))" "$lib" FAIL 0 "$log"
  fi
}

if want host && [ -x "$sweep" ]; then
  run "coll_sweep --host-check" weft "$logs/host-check.log" "$sweep" --host-check
fi

for lib in "${libs[@]}"; do
  for g in "${rankCounts[@]}"; do
    if want sweep && [ -x "$sweep" ]; then
      args=(-g "$g" -m "$modes")
      [ "$quick" = 1 ] && args+=(--quick)
      # shellcheck disable=SC2206
      [ -n "$sweepArgs" ] && args+=($sweepArgs)
      log="$logs/sweep-$lib-g$g.log"
      run "coll_sweep -g $g -m $modes$([ "$quick" = 1 ] && echo ' --quick')" "$lib" "$log" "$sweep" "${args[@]}"
      checkLoaded "$log" "$lib"
    fi
    if want iree && [ -x "$iree" ]; then
      run "iree_style_test -g $g" "$lib" "$logs/iree-$lib-g$g.log" "$iree" -g "$g"
    fi
  done
  if want torch; then
    if python3 -c "import torch" >/dev/null 2>&1; then
      tw=2
      [ "$ngpu" -lt 2 ] && tw=$ngpu
      if [ "$lib" = weft ]; then
        run "torch_dist_test (world $tw)" weft "$logs/torch-weft.log" \
            python3 "$here/tests/gpu/torch_dist_test.py" --world "$tw" --lib "$weftLib" --expect-weft
      else
        run "torch_dist_test (world $tw)" ref "$logs/torch-ref.log" \
            python3 "$here/tests/gpu/torch_dist_test.py" --world "$tw" --lib "$ref/libnccl.so.2"
      fi
    else
      record "torch_dist_test" "$lib" SKIP 0 "(python3 cannot import torch)"
    fi
  fi
done

# Ranks with different settings: creation fails with the setting named (weft only; NCCL does not check).
if want mismatch && [ "$refOnly" = 0 ] && [ "$ngpu" -ge 2 ]; then
  run "settings_mismatch_test" weft "$logs/mismatch.log" python3 "$here/tests/gpu/settings_mismatch_test.py" --lib "$weftLib"
fi

# Peer failure (weft only: NVIDIA's NCCL has no peer watchdog, so its survivors would just wait).
if want faults && [ "$refOnly" = 0 ] && [ "$ngpu" -ge 1 ] && [ -x "$faults" ]; then
  run "weft_gpu_fault_test -n 3 -g $ngpu" weft "$logs/faults.log" "$faults" -n 3 -g "$ngpu"
fi

# Memory accounting: what each communicator reports against what the GPU lost (weft only: NCCL
# writes no such report; `--observe` shows its footprint).
if want memory && [ "$refOnly" = 0 ] && [ "$ngpu" -ge 1 ] && [ -x "$memory" ]; then
  memRanks=$(( ngpu > 2 ? ngpu : 2 ))
  run "weft_gpu_memory_test -n $memRanks" weft "$logs/memory.log" "$memory" -n "$memRanks"
fi

echo
echo "== GPU test results (logs in $logs)"
printf '  %-44s %-5s %-5s %6s  %s\n' step lib result secs log
fail=0
for r in "${results[@]}"; do
  IFS='|' read -r name lib res secs log <<<"$r"
  printf '  %-44s %-5s %-5s %6s  %s\n' "$name" "$lib" "$res" "$secs" "$log"
  [ "$res" = FAIL ] && fail=1
done
[ -n "$ref" ] && echo "  (lib 'ref' = $ref: failures there point at the tests, not at weft)"
echo "run_gpu_tests: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
