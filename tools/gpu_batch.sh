#!/usr/bin/env bash
# One GPU batch as used in session 3 (device tool, nvidia-h200-x2): build, coll_sweep by forced
# algorithm/protocol and launch mode, torch and IREE-style clients, then small-message latency and
# busbw against NCCL 2.28.9 (PyTorch's wheel) in the same run with the same binaries. Most output
# goes to stdout (the device tool returns at most 8 files from $OUT).
#   bash tools/gpu_batch.sh [quick]      quick: skip the 2-8 GiB all_reduce
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-/tmp/weft-gpu-batch}; L=$OUT/logs; mkdir -p $L
QUICK=${1:-}
B=build-gpu
NCCL=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA_ARCHS=90 > $L/cfg.log 2>&1
t0=$SECONDS; cmake --build $B -j30 --target weft_shared coll_sweep iree_style_test weft-perf weft_kernel_harness > $L/build.log 2>&1
rc=$?; echo "build rc=$rc $((SECONDS-t0)) s"; [ $rc = 0 ] || { grep -m5 error $L/build.log; exit 1; }

sw() {  # label "VAR=value ..." coll_sweep-args...
  local label=$1 e=$2; shift 2
  env $e timeout 200 $B/tests/gpu/coll_sweep -g 2 --quick --timeout 25 "$@" > $L/sw-$label.log 2>&1
  echo "sweep $label ($e $*) rc=$?"; grep -E "FAIL|no progress" $L/sw-$label.log | head -4
}
sw default "X=1" -m threads,procs,initall
sw ll "NCCL_PROTO=LL" -m threads
sw tree "NCCL_ALGO=allreduce:tree" -m threads
sw direct "NCCL_ALGO=allreduce:direct,allgather:direct" -m threads,procs
sw twoshot "NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1" -m threads
timeout 60 $B/tests/gpu/weft_kernel_harness --mode correctness --proto ll --quick > $L/harness.log 2>&1; echo "harness LL rc=$?"
timeout 60 $B/tests/gpu/weft_kernel_harness --mode correctness --proto ll128 --quick > $L/harness128.log 2>&1; echo "harness LL128 rc=$? (LL128 is off in isSupported)"; grep -c FAIL $L/harness128.log; grep -m3 FAIL $L/harness128.log
timeout 60 $B/tests/gpu/iree_style_test > $L/iree.log 2>&1; echo "iree rc=$?"
timeout 200 python3 tests/gpu/torch_dist_test.py --lib $B/libnccl.so.2 --expect-weft > $L/torch.log 2>&1; echo "torch rc=$?"; tail -2 $L/torch.log

echo "== latency, us (all_reduce, -t 2 -g 1, then CUDA graph -G 10)"
for m in "-t 2 -g 1" "-t 2 -g 1 -G 10"; do for v in nccl:$NCCL weft:$B; do
  echo "# ${v%%:*} $m"; LD_LIBRARY_PATH=${v#*:} timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 64K -f 8 -c 1 -n 300 -w 50 $m 2>&1 |
    grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $6} END{print ""}'
done; done
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 1G -f 8 -c 0 -n 1 -w 0 -g 2 2>&1 |
  grep -oE "AllReduce: [0-9]+ Bytes -> .*" | sort -u | sort -n -k2 | head -16
echo "== busbw GB/s per size (weft-perf -g 2 -c 0): ops and sizes as labelled"
perf() {  # label ops -b -e -f -n
  for v in nccl:$NCCL weft:$B; do echo "### ${v%%:*}" >> $L/$1.log
    LD_LIBRARY_PATH=${v#*:} timeout 200 $B/tools/weft-perf $2 -g 2 -b $3 -e $4 -f $5 -c 0 -n $6 -w 2 >> $L/$1.log 2>&1; done
  python3 tools/ratio_table.py $L/$1.log --ops $2
}
perf mid all_reduce,all_gather,reduce_scatter 256K 64M 4 20
perf big broadcast,reduce,sendrecv,alltoall,all_reduce,all_gather,reduce_scatter 64M 1G 4 8
[ "$QUICK" = quick ] || perf huge all_reduce 2G 8G 4 3
