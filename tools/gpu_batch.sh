#!/usr/bin/env bash
# One GPU batch as used in session 2 (device tool, nvidia-h200-x2): build, kernel harness (LL), coll_sweep
# by forced protocol/algorithm and launch mode, small-message latency and bandwidth against NCCL in the same
# run. Logs under $OUT (the device tool returns at most 8 files, so most output goes to stdout).
#   bash tools/gpu_batch.sh
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PATH=/usr/local/cuda/bin:$PATH
L=$OUT/logs; mkdir -p $L
B=build-gpu
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA_ARCHS=90 > $L/cfg.log 2>&1
t0=$SECONDS; cmake --build $B -j30 --target weft_shared coll_sweep iree_style_test weft-perf weft_kernel_harness > $L/build.log 2>&1; echo "build rc=$? $((SECONDS-t0)) s"; tail -2 $L/build.log
NCCL=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
for p in ll; do timeout 60 $B/tests/gpu/weft_kernel_harness --mode correctness --proto $p --quick > $L/h-$p.log 2>&1; echo "harness $p rc=$?"; grep -iE "fail|pass" $L/h-$p.log | tail -3; done
timeout 60 $B/tests/gpu/weft_kernel_harness --mode abort --proto all >> $L/h-ll.log 2>&1; echo "harness abort rc=$?"
sw() { # label "env" args
  local label=$1 e=$2; shift 2
  env $e timeout 90 $B/tests/gpu/coll_sweep -g 2 --quick --timeout 25 "$@" > $L/sw-$label.log 2>&1; echo "sweep $label rc=$?"
  grep -E "FAIL|no progress|rank [0-9]: " $L/sw-$label.log | head -5
}
sw default "X=1" -m threads,procs
sw ll "NCCL_PROTO=LL" -m threads
true
sw tree "NCCL_ALGO=allreduce:tree" -m threads
sw initall "X=1" -m initall,groupinit --no-sweep
lat() { local label=$1 lib=$2; shift 2; echo "### $label" >> $OUT/lat.log
  LD_LIBRARY_PATH=$lib timeout 40 $B/tools/weft-perf all_reduce -b 8 -e 64K -f 8 -c 1 -n 200 -w 50 "$@" >> $OUT/lat.log 2>&1; }
lat nccl-t2 $NCCL -t 2 -g 1; lat weft-t2 $B -t 2 -g 1
lat nccl-graph $NCCL -t 2 -g 1 -G 10; lat weft-graph $B -t 2 -g 1 -G 10
grep -E "^###|^ +[0-9]+ " $OUT/lat.log | awk '{print $1, $6, $10}'
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$B timeout 40 $B/tools/weft-perf all_reduce -b 8 -e 1G -f 16 -c 0 -n 2 -w 1 -g 2 2>&1 | grep -oE "AllReduce: [0-9]+ Bytes -> .*" | sort -u | sort -n -k2 | head -12
perfrun() { local label=$1 lib=$2; shift 2; echo "### $label" >> $OUT/exp.log
  env LD_LIBRARY_PATH=$lib "$@" timeout 100 $B/tools/weft-perf broadcast,reduce,sendrecv,alltoall,all_reduce,all_gather,reduce_scatter -g 2 -b 64M -e 1G -f 4 -c 0 -n 8 -w 2 >> $OUT/exp.log 2>&1; }
perfrun nccl $NCCL
perfrun weft $B
python3 tools/ratio_table.py $OUT/exp.log
timeout 200 python3 tests/gpu/torch_dist_test.py --lib $B/libnccl.so.2 --expect-weft > $L/torch.log 2>&1; echo "torch rc=$?"; tail -3 $L/torch.log
