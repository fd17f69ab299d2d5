#!/usr/bin/env bash
# GPU batches for the device tool (nvidia-h200-x2): build, then the stages asked for, each
# printing a short summary to stdout (the device tool returns at most 8 files from $OUT; full
# logs go to $OUT/logs). NCCL to compare with is NCCL 2.28.9 from PyTorch's wheel, run in the
# same call with the same binaries. One device call may run 10 minutes, so split the stages, e.g.
#   bash tools/gpu_batch.sh correct                (~8 min with the build)
#   bash tools/gpu_batch.sh latency perf           (~5 min; the build folder survives while warm)
#   bash tools/gpu_batch.sh scan fit               (~5 min)
#   bash tools/gpu_batch.sh warps                  (~7 min)
#   bash tools/gpu_batch.sh verify                 (~9 min with the build; session 5's changes)
#   bash tools/gpu_batch.sh special                (~9 min with the build; then special2, ~5 min)
#   bash tools/gpu_batch.sh final6 regress         (~9 min with the build)
# Stages: correct (coll_sweep per forced algorithm/protocol and launch mode, kernel harness,
# IREE-style and torch clients), latency (small all_reduce, one thread per GPU and CUDA graph,
# default and forced Direct; the tuner's picks), perf (busbw ratios 256 KiB - 1 GiB), huge
# (all_reduce 2-8 GiB), scan (busbw of broadcast/sendrecv/all_reduce per channel count, buffer
# size, p2p warp split), fit (tools/fit_curves.sh: data lines for the tuning model fit), warps
# (Simple blocks of 17 and 20 warps as NCCL's, built beside the default, against NCCL).
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-/tmp/weft-gpu-batch}; L=$OUT/logs; mkdir -p $L
B=build-gpu
NCCL=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
STAGES=${*:-correct latency}
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA_ARCHS=90 > $L/cfg.log 2>&1
t0=$SECONDS; cmake --build $B -j30 --target weft_shared coll_sweep iree_style_test weft-perf weft_kernel_harness > $L/build.log 2>&1
rc=$?; echo "build rc=$rc $((SECONDS-t0)) s"; [ $rc = 0 ] || { grep -m5 error $L/build.log; exit 1; }

sw() {  # label "VAR=value ..." coll_sweep-args...
  local label=$1 e=$2; shift 2
  env $e timeout 200 $B/tests/gpu/coll_sweep -g 2 --quick --timeout 25 "$@" > $L/sw-$label.log 2>&1
  echo "sweep $label ($e $*) rc=$?"; grep -E "FAIL|no progress" $L/sw-$label.log | head -4
}

stage_correct() {
  timeout 60 $B/tests/gpu/weft_kernel_harness --mode correctness --proto ll --quick > $L/harness.log 2>&1; echo "harness LL rc=$?"
  timeout 60 $B/tests/gpu/weft_kernel_harness --mode correctness --proto ll128 --quick > $L/harness128.log 2>&1
  echo "harness LL128 rc=$? failures: $(grep -c FAIL $L/harness128.log)"; grep -m3 FAIL $L/harness128.log
  sw default "X=1" -m threads,procs,initall
  sw ll "NCCL_PROTO=LL" -m threads
  sw ll128 "NCCL_WEFT_ENABLE_LL128=1 NCCL_PROTO=LL128" -m threads,procs
  sw tree "NCCL_ALGO=allreduce:tree NCCL_PROTO=Simple" -m threads
  sw treell "NCCL_ALGO=allreduce:tree NCCL_PROTO=LL" -m threads,procs
  sw treell128 "NCCL_WEFT_ENABLE_LL128=1 NCCL_ALGO=allreduce:tree NCCL_PROTO=LL128" -m threads
  sw direct "NCCL_ALGO=allreduce:direct,allgather:direct" -m threads,procs
  sw twoshot "NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1" -m threads
  timeout 60 $B/tests/gpu/iree_style_test > $L/iree.log 2>&1; echo "iree rc=$?"
  timeout 200 python3 tests/gpu/torch_dist_test.py --lib $B/libnccl.so.2 --expect-weft > $L/torch.log 2>&1
  echo "torch rc=$?"; tail -2 $L/torch.log
}

stage_latency() {
  echo "== latency, us (all_reduce 8 B - 64 KiB; -t 2 -g 1, then CUDA graph -G 10)"
  for m in "-t 2 -g 1" "-t 2 -g 1 -G 10"; do
    for v in "nccl:$NCCL:X=1" "weft:$B:X=1" "weft-direct:$B:NCCL_ALGO=allreduce:direct" \
             "weft-twoshot:$B:NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1"; do
      IFS=: read -r label lib envs <<< "$v"
      printf "%-13s %-16s " "$label" "$m"
      env $envs LD_LIBRARY_PATH=$lib timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 64K -f 8 -c 1 -n 300 -w 50 $m 2>&1 |
        grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $6} END{print ""}'
    done
  done
  echo "== tuner picks (weft, all_reduce -g 2)"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 1G -f 8 -c 0 -n 1 -w 0 -g 2 2>&1 |
    grep -oE "AllReduce: [0-9]+ Bytes -> .*" | sort -u | sort -n -k2 | head -16
}

perf() {  # label ops -b -e -f -n
  for v in nccl:$NCCL weft:$B; do echo "### ${v%%:*}" >> $L/$1.log
    LD_LIBRARY_PATH=${v#*:} timeout 200 $B/tools/weft-perf $2 -g 2 -b $3 -e $4 -f $5 -c 0 -n $6 -w 2 >> $L/$1.log 2>&1; done
  python3 tools/ratio_table.py $L/$1.log --ops $2
}
stage_perf() {
  echo "== busbw GB/s per size (weft-perf -g 2 -c 0): ops and sizes as labelled"
  perf mid all_reduce,all_gather,reduce_scatter 256K 64M 4 20
  perf big broadcast,reduce,sendrecv,alltoall,all_reduce,all_gather,reduce_scatter 64M 1G 4 8
}
stage_huge() { perf huge all_reduce 2G 8G 4 3; }
# Where broadcast/sendrecv/all_reduce plateau below NCCL at 256 MiB - 1 GiB: busbw per setting.
stage_scan() {
  echo "== knob scan: busbw GB/s at 256M 1G (weft-perf -g 2 -c 0 -n 8)"
  for e in "X=1" "NCCL_MAX_NCHANNELS=16" "NCCL_MAX_NCHANNELS=24" "NCCL_MIN_NCHANNELS=32 NCCL_MAX_NCHANNELS=32" \
           "NCCL_BUFFSIZE=2097152" "NCCL_BUFFSIZE=8388608" "NCCL_WEFT_P2P_SEND_WARPS=7"; do
    for op in broadcast sendrecv all_reduce; do
      printf "%-44s %-10s " "$e" "$op"
      env $e LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf $op -g 2 -b 256M -e 1G -f 4 -c 0 -n 8 -w 2 2>&1 |
        grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $8} END{print ""}'
    done
  done
}
stage_fit() { bash tools/fit_curves.sh $B 2 | tee $L/fit.txt; }
# Simple blocks of 17 warps (NCCL's 16 copy warps + 1) and 20 (NCCL's send/recv block), built
# beside the default (WEFT_SIMPLE_WARPS, 96 registers): quick sweep, then busbw against NCCL.
stage_warps() {
  local w pids=()
  for w in 17 20; do
    (cmake -S . -B $B-w$w -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA_ARCHS=90 -DWEFT_SIMPLE_WARPS=$w \
       -DWEFT_BUILD_TESTS=OFF > $L/cfg-w$w.log 2>&1 && cmake --build $B-w$w -j15 --target weft_shared > $L/build-w$w.log 2>&1) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p || echo "variant build failed: $(grep -m3 error $L/build-w*.log)"; done
  for w in 17 20; do
    LD_LIBRARY_PATH=$B-w$w timeout 200 $B/tests/gpu/coll_sweep -g 2 --quick --timeout 25 -m threads > $L/sw-w$w.log 2>&1
    echo "sweep w$w rc=$?"; grep -E "FAIL|no progress" $L/sw-w$w.log | head -3
  done
  echo "== busbw GB/s at 256M 1G: NCCL, weft 16 warps, 17, 20 (weft-perf -g 2 -c 0 -n 8)"
  for op in broadcast sendrecv all_reduce reduce all_gather; do
    for v in nccl:$NCCL w16:$B w17:$B-w17 w20:$B-w20; do
      printf "%-10s %-5s " $op ${v%%:*}
      LD_LIBRARY_PATH=${v#*:} timeout 60 $B/tools/weft-perf $op -g 2 -b 256M -e 1G -f 4 -c 0 -n 8 -w 2 2>&1 |
        grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $8} END{print ""}'
    done
  done
}

# Session 5's changes: LL128 with the reload after the flags (harness, sweeps, mid sizes with
# LL128 allowed), the specialized Direct kernels against the general one (latency, sweeps), and a
# channel scan of the collectives the first scan left out.
lat() {  # label "VAR=value ..." lib weft-perf-args...
  local label=$1 e=$2 lib=$3; shift 3
  printf "%-13s %-22s " "$label" "$*"
  env $e LD_LIBRARY_PATH=$lib timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 64K -f 8 -c 1 -n 300 -w 50 "$@" 2>&1 |
    grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $6} END{print ""}'
}
stage_verify() {
  timeout 90 $B/tests/gpu/weft_kernel_harness --mode correctness --proto ll128 --quick > $L/harness128.log 2>&1
  echo "harness LL128 rc=$? failures: $(grep -c FAIL $L/harness128.log)"; grep -m3 FAIL $L/harness128.log
  sw direct "NCCL_ALGO=allreduce:direct,allgather:direct" -m threads,procs
  echo "== latency, us (all_reduce 8 B - 64 KiB): special = specialized Direct kernel, general = NCCL_WEFT_SPECIAL_KERNELS=0"
  for m in "-t 2 -g 1" "-t 2 -g 1 -G 10" "-t 1 -g 1" "-t 1 -g 1 -G 10"; do
    lat nccl "X=1" $NCCL $m; lat weft-special "X=1" $B $m; lat weft-general "NCCL_WEFT_SPECIAL_KERNELS=0" $B $m
  done
  sw ll128 "NCCL_WEFT_ENABLE_LL128=1 NCCL_PROTO=LL128" -m threads,procs
  sw default "X=1" -m threads,procs
  stage_perf
  echo "== weft with LL128 allowed (NCCL_WEFT_ENABLE_LL128=1): busbw GB/s, and the tuner's picks"
  for op in all_reduce all_gather reduce_scatter; do
    printf "%-15s " $op
    NCCL_WEFT_ENABLE_LL128=1 LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf $op -g 2 -b 256K -e 64M -f 4 -c 0 -n 20 -w 2 2>&1 |
      grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $8} END{print ""}'
  done
  NCCL_WEFT_ENABLE_LL128=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf all_reduce -b 256K -e 64M -f 4 -c 0 -n 1 -w 0 -g 2 2>&1 |
    grep -oE "AllReduce: [0-9]+ Bytes -> .*" | sort -u | sort -n -k2 | head -8
  sw treell128 "NCCL_WEFT_ENABLE_LL128=1 NCCL_ALGO=allreduce:tree NCCL_PROTO=LL128" -m threads
  sw directgen "NCCL_WEFT_SPECIAL_KERNELS=0 NCCL_ALGO=allreduce:direct,allgather:direct" -m threads
  echo "== channel scan: busbw GB/s at 256M 1G"
  for e in "NCCL_MAX_NCHANNELS=16" "NCCL_MAX_NCHANNELS=24" "X=1"; do
    for op in reduce all_gather reduce_scatter alltoall; do
      printf "%-24s %-15s " "$e" "$op"
      env $e LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf $op -g 2 -b 256M -e 1G -f 4 -c 0 -n 8 -w 2 2>&1 |
        grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $8} END{print ""}'
    done
  done
}

# Session 6: the specialized Simple kernels (Ring sums of float/half/bf16, Ring copies, SendRecv)
# against the general ones (NCCL_WEFT_SPECIAL_KERNELS=0) and NCCL, then a channel scan with them.
VARIANTS=${VARIANTS:-"nccl:$NCCL:X=1 weft:$B:X=1 general:$B:NCCL_WEFT_SPECIAL_KERNELS=0"}
perfv() {  # label ops -b -e -f -n: every "label:lib:VAR=value" of $VARIANTS (nccl first)
  for v in $VARIANTS; do
    IFS=: read -r label lib envs <<< "$v"; echo "### $label" >> $L/$1.log
    env $envs LD_LIBRARY_PATH=$lib timeout 200 $B/tools/weft-perf $2 -g 2 -b $3 -e $4 -f $5 -c 0 -n $6 -w 2 >> $L/$1.log 2>&1
  done
  python3 tools/ratio_table.py $L/$1.log --ops $2
}
stage_special() {
  sw default "X=1" -m threads
  echo "== busbw GB/s weft/NCCL (weft-perf -g 2 -c 0): weft = specialized kernels, general = NCCL_WEFT_SPECIAL_KERNELS=0"
  perfv big broadcast,reduce,sendrecv,alltoall,all_reduce,all_gather,reduce_scatter 64M 1G 4 8
  perfv mid all_reduce,all_gather,reduce_scatter 256K 64M 4 20
}
stage_special2() {
  sw procs "X=1" -m procs,initall
  sw general "NCCL_WEFT_SPECIAL_KERNELS=0" -m threads
  echo "== one rank, CUDA graph, all_reduce 8 B - 64 KiB, us"
  lat nccl "X=1" $NCCL -t 1 -g 1 -G 10; lat weft "X=1" $B -t 1 -g 1 -G 10
  lat weft-general "NCCL_WEFT_SPECIAL_KERNELS=0" $B -t 1 -g 1 -G 10
  echo "== channel scan with the specialized kernels: busbw GB/s at 64M 256M 1G"
  for e in "NCCL_MAX_NCHANNELS=16" "NCCL_MAX_NCHANNELS=24" "X=1"; do
    for op in broadcast reduce sendrecv alltoall all_reduce all_gather reduce_scatter; do
      printf "%-24s %-15s " "$e" "$op"
      env $e LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf $op -g 2 -b 64M -e 1G -f 4 -c 0 -n 8 -w 2 2>&1 |
        grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $8} END{print ""}'
    done
  done
  echo "== spill lines (LDL/STL per source line) of the specialized Simple kernels"
  bash tools/spill_lines.sh $B/libnccl.so.2 weftKernelSpecialSimple 2>&1 | head -30
}

# Forced algorithms and protocols, and the clients, after a change of the Simple kernels.
stage_regress() {
  sw ll "NCCL_PROTO=LL" -m threads
  sw tree "NCCL_ALGO=allreduce:tree NCCL_PROTO=Simple" -m threads,procs
  sw treell "NCCL_ALGO=allreduce:tree NCCL_PROTO=LL" -m threads
  sw direct "NCCL_ALGO=allreduce:direct,allgather:direct" -m threads
  sw twoshot "NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1" -m threads
  timeout 60 $B/tests/gpu/iree_style_test > $L/iree.log 2>&1; echo "iree rc=$?"
  timeout 150 python3 tests/gpu/torch_dist_test.py --lib $B/libnccl.so.2 --expect-weft > $L/torch.log 2>&1
  echo "torch rc=$?"; tail -2 $L/torch.log
}

# Session 6's end state: sweeps, busbw against NCCL (weft and the general kernels), latency.
stage_final6() {
  sw default "X=1" -m threads,procs,initall
  sw general "NCCL_WEFT_SPECIAL_KERNELS=0" -m threads
  echo "== busbw GB/s weft/NCCL (weft-perf -g 2 -c 0); general = NCCL_WEFT_SPECIAL_KERNELS=0"
  perfv big broadcast,reduce,sendrecv,alltoall,all_reduce,all_gather,reduce_scatter 64M 1G 4 8
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1"
  perfv mid all_reduce,all_gather,reduce_scatter,broadcast,reduce 256K 64M 4 40
  echo "== latency, us (all_reduce 8 B - 64 KiB)"
  for m in "-t 2 -g 1" "-t 2 -g 1 -G 10" "-t 1 -g 1 -G 10"; do lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; done
}

for s in $STAGES; do
  t0=$SECONDS; echo "=== stage $s"; "stage_$s"; echo "=== stage $s took $((SECONDS-t0)) s"
done
