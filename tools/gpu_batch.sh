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
if [ -n "${PREBUILT:-}" ]; then
  # Binaries built elsewhere (tools/prebuilt.sh) and carried: no build, ~7 minutes of device time
  # saved. Their run paths point at the build machine's folders, so the loader searches $B.
  B=$PREBUILT; export LD_LIBRARY_PATH=$B; echo "prebuilt: $(cat $B/BUILT_FROM 2>/dev/null)"
else
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA_ARCHS=90 > $L/cfg.log 2>&1
  t0=$SECONDS; cmake --build $B -j30 --target weft_shared coll_sweep iree_style_test weft-perf weft_kernel_harness > $L/build.log 2>&1
  rc=$?; echo "build rc=$rc $((SECONDS-t0)) s"; [ $rc = 0 ] || { grep -m5 error $L/build.log; exit 1; }
fi

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

# Session 7: where a latency-bound launch spends its time. tools/launch_floor.cu times small
# kernels that each add one thing a weft kernel does; Nsight Compute times weft's own kernels for
# one rank (no peers: the fixed cost alone).
ncu_kernels() {  # label "VAR=value ..." weft-perf-args...
  local label=$1 e=$2; shift 2
  env $e timeout 150 ncu --clock-control none --cache-control none --launch-skip 30 --launch-count 4 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__cycles_elapsed.max,smsp__inst_executed.sum \
    $B/tools/weft-perf "$@" > $L/ncu-$label.log 2>&1
  echo "ncu $label ($e $*) rc=$?"
  grep -E "^  [A-Za-z_].*\(|gpu__time_duration|launch__grid|launch__block_size|registers|cycles_elapsed|inst_executed" $L/ncu-$label.log | head -14
}
stage_floor() {
  nvcc -O3 -arch=sm_90 -o /tmp/launch_floor tools/launch_floor.cu && CUDA_VISIBLE_DEVICES=0 /tmp/launch_floor | tee $L/floor.txt
  ncu_kernels one "X=1" all_reduce -b 8 -e 8 -c 0 -n 40 -w 5 -t 1 -g 1
  ncu_kernels onegen "NCCL_WEFT_SPECIAL_KERNELS=0" all_reduce -b 8 -e 8 -c 0 -n 40 -w 5 -t 1 -g 1
  ncu_kernels one32k "X=1" all_reduce -b 32K -e 32K -c 0 -n 40 -w 5 -t 1 -g 1
  env LD_LIBRARY_PATH=$NCCL timeout 100 ncu --clock-control none --launch-skip 30 --launch-count 2 --metrics gpu__time_duration.sum \
    $B/tools/weft-perf all_reduce -b 8 -e 8 -c 0 -n 40 -w 5 -t 1 -g 1 > $L/ncu-nccl.log 2>&1
  echo "ncu nccl one rank rc=$?"; grep -E "^  [A-Za-z_].*\(|gpu__time_duration" $L/ncu-nccl.log | head -6
  echo "== latency, us (all_reduce 8 B - 64 KiB)"
  for m in "-t 2 -g 1" "-t 2 -g 1 -G 10" "-t 1 -g 1 -G 10"; do lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; done
  lat weft-direct-gen "NCCL_WEFT_SPECIAL_KERNELS=0" $B -t 2 -g 1 -G 10
}

# Where the one-rank kernel's block waits: warp-state sampling (stall reasons), whole kernel and
# per SASS instruction (CSV, for the top stalls).
stage_stalls() {
  local n=ncu
  for v in "special:X=1" "general:NCCL_WEFT_SPECIAL_KERNELS=0" "direct1:NCCL_ALGO=allreduce:direct"; do
    local label=${v%%:*} e=${v#*:}
    env $e timeout 150 $n --clock-control none --cache-control none --launch-skip 30 --launch-count 1 --warp-sampling-interval 0 \
      --section WarpStateStats --section SourceCounters --section LaunchStats --section InstructionStats \
      $B/tools/weft-perf all_reduce -b 8 -e 8 -c 0 -n 40 -w 5 -t 1 -g 1 > $L/stall-$label.txt 2>&1
    echo "stalls $label rc=$?"; grep -E "Duration|Stall|stall|Warp Cycles|Issued" $L/stall-$label.txt | head -30
    env $e timeout 150 $n --clock-control none --cache-control none --launch-skip 30 --launch-count 1 --warp-sampling-interval 0 \
      --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
      $B/tools/weft-perf all_reduce -b 8 -e 8 -c 0 -n 40 -w 5 -t 1 -g 1 > $L/sass-$label.csv 2>&1
    echo "sass $label rc=$? lines $(wc -l < $L/sass-$label.csv)"
  done
}

# Session 7: latency after taking local memory out of the Simple and Direct kernels; the sweeps
# that cover them; busbw of the kernels whose registers changed.
stage_s7() {
  nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/launch_floor tools/launch_floor.cu && CUDA_VISIBLE_DEVICES=0 /tmp/launch_floor | tee $L/floor.txt | grep host
  echo "== latency, us (all_reduce 8 B - 64 KiB)"
  for m in "-t 2 -g 1" "-t 2 -g 1 -G 10" "-t 1 -g 1 -G 10"; do lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; done
  lat weft-ringll "NCCL_ALGO=allreduce:ring NCCL_PROTO=LL" $B -t 2 -g 1 -G 10
  lat weft-twoshot "NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1" $B -t 2 -g 1 -G 10
  sw default "X=1" -m threads,procs
  sw direct "NCCL_ALGO=allreduce:direct,allgather:direct" -m threads,procs
  sw ll "NCCL_PROTO=LL" -m threads
  sw general "NCCL_WEFT_SPECIAL_KERNELS=0" -m threads
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1"
  perfv big broadcast,all_gather,reduce,all_reduce,reduce_scatter,sendrecv,alltoall 64M 1G 4 8
}

# PDL in the launch floor; knob scans for the two collectives below 0.95x at 1 GiB (reduce, sendrecv).
stage_scan7() {
  nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/launch_floor tools/launch_floor.cu && CUDA_VISIBLE_DEVICES=0 /tmp/launch_floor | tee $L/floor.txt
  echo "== busbw GB/s at 256M 1G per setting"
  for e in "X=1" "NCCL_WEFT_TUNING=channelshare.reduce=0.375" "NCCL_WEFT_TUNING=channelshare.reduce=0.625" \
           "NCCL_WEFT_TUNING=channelshare.reduce=0.75" "NCCL_BUFFSIZE=8388608" "NCCL_BUFFSIZE=2097152"; do
    printf "%-46s %-10s " "$e" reduce
    env $e LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf reduce -g 2 -b 256M -e 1G -f 4 -c 0 -n 8 -w 2 2>&1 |
      grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $8} END{print ""}'
  done
  for e in "X=1" "NCCL_WEFT_P2P_SEND_WARPS=4" "NCCL_WEFT_P2P_SEND_WARPS=6" "NCCL_WEFT_P2P_SEND_WARPS=7" \
           "NCCL_WEFT_P2P_MAX_CHANNELS=16" "NCCL_WEFT_P2P_MAX_CHANNELS=28" "NCCL_WEFT_P2P_MAX_CHANNELS=32" \
           "NCCL_BUFFSIZE=8388608" "NCCL_BUFFSIZE=2097152"; do
    printf "%-46s %-10s " "$e" sendrecv
    env $e LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf sendrecv -g 2 -b 256M -e 1G -f 4 -c 0 -n 8 -w 2 2>&1 |
      grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $8} END{print ""}'
  done
  printf "%-46s %-10s " nccl sendrecv; LD_LIBRARY_PATH=$NCCL timeout 60 $B/tools/weft-perf sendrecv -g 2 -b 256M -e 1G -f 4 -c 0 -n 8 -w 2 2>&1 |
      grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $8} END{print ""}'
}

# One GPU (the copy path), the IREE-style and PyTorch clients.
clients() {
  timeout 100 $B/tests/gpu/coll_sweep -g 1 --quick --timeout 25 -m threads,initall > $L/sw-one.log 2>&1
  echo "sweep one GPU rc=$?"; grep -E "FAIL|no progress" $L/sw-one.log | head -4
  timeout 60 $B/tests/gpu/iree_style_test > $L/iree.log 2>&1; echo "iree rc=$?"
  timeout 150 python3 tests/gpu/torch_dist_test.py --lib $B/libnccl.so.2 --expect-weft > $L/torch.log 2>&1
  echo "torch rc=$?"; tail -2 $L/torch.log
}

# The leaner Direct kernel (head read with the steps, first pack read before the wait), one rank
# as copies, and programmatic dependent launch (NCCL_WEFT_PDL=1) against the default.
stage_s7b() {
  echo "== latency, us (all_reduce 8 B - 64 KiB)"
  for m in "-t 2 -g 1" "-t 2 -g 1 -G 10" "-t 1 -g 1 -G 10"; do
    lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; lat weft-pdl "NCCL_WEFT_PDL=1" $B $m
  done
  lat nccl "X=1" $NCCL -t 2 -g 1 -G 10; lat weft "X=1" $B -t 2 -g 1 -G 10; lat weft-pdl "NCCL_WEFT_PDL=1" $B -t 2 -g 1 -G 10
  lat weft-twoshot "NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1" $B -t 2 -g 1 -G 10
  sw default "X=1" -m threads,procs,initall
  sw pdl "NCCL_WEFT_PDL=1" -m threads,procs
  sw direct "NCCL_ALGO=allreduce:direct,allgather:direct" -m threads,procs
  sw twoshot "NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1" -m threads
  clients
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1 pdl:$B:NCCL_WEFT_PDL=1"
  perfv mid all_reduce,all_gather,reduce_scatter 256K 64M 4 40
}

# Session 7's end state: PDL on by default, the Direct kernel's 8-byte packs inline.
stage_final7() {
  echo "== latency, us (all_reduce 8 B - 64 KiB); weft-nopdl = NCCL_WEFT_PDL=0"
  for m in "-t 2 -g 1" "-t 2 -g 1 -G 10" "-t 1 -g 1 -G 10"; do
    lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; lat weft-nopdl "NCCL_WEFT_PDL=0" $B $m
  done
  echo "== host time per operation in the enqueue calls (-t 2 -g 1, 8 B and 32 KiB)"
  for v in "nccl:$NCCL" "weft:$B"; do
    printf "%-6s " ${v%%:*}; WEFT_PERF_HOST_TIME=1 LD_LIBRARY_PATH=${v#*:} timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 32K -f 4096 -c 0 -n 300 -w 50 -t 2 -g 1 2>&1 |
      grep -oE "host [0-9.]+ us" | tr '\n' ' '; echo
  done
  sw default "X=1" -m threads,procs,initall
  sw nopdl "NCCL_WEFT_PDL=0" -m threads
  sw ll "NCCL_PROTO=LL" -m threads
  sw tree "NCCL_ALGO=allreduce:tree NCCL_PROTO=Simple" -m threads,procs
  sw treell "NCCL_ALGO=allreduce:tree NCCL_PROTO=LL" -m threads
  sw general "NCCL_WEFT_SPECIAL_KERNELS=0" -m threads
  sw direct "NCCL_ALGO=allreduce:direct,allgather:direct" -m threads,procs
  sw twoshot "NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1" -m threads
  clients
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1"
  perfv big broadcast,reduce,sendrecv,alltoall,all_reduce,all_gather,reduce_scatter 64M 1G 4 8
  perfv mid all_reduce,all_gather,reduce_scatter,broadcast,reduce 256K 64M 4 40
}

for s in $STAGES; do
  t0=$SECONDS; echo "=== stage $s"; "stage_$s"; echo "=== stage $s took $((SECONDS-t0)) s"
done
