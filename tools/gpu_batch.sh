#!/usr/bin/env bash
# GPU batches for the device tool: build (or take PREBUILT binaries), then the stages asked for,
# each printing a short summary to stdout (full logs go to $OUT/logs). NCCL to compare with is
# NCCL 2.28.9 from PyTorch's wheel, run in the same call with the same binaries. Every stage uses
# NG GPUs (default: all the machine has). One device call may run 10 minutes, so split, e.g.
#   PREBUILT=scratch/pre bash tools/gpu_batch.sh final            (~1 min on 2 GPUs: the end-state check)
#   PREBUILT=scratch/pre bash tools/gpu_batch.sh multi full multiperf  (~2.5 min on 4 GPUs)
# (Without PREBUILT the build adds ~6 minutes.)
# Stages: correct (kernel harness, coll_sweep per forced algorithm/protocol and launch mode,
# clients), latency (small all_reduce, one thread per GPU and CUDA graph; the tuner's picks), perf
# (busbw ratios 256 KiB - 1 GiB), faults (peers killed and stopped mid-operation), misuse (bad
# buffers refused, unusual ones taken; NCCL observed with the same calls), register (buffer
# registration, NCCL observed; PyTorch's allocator hook), determinism (same bits each run and
# rank), zerocopy (registered point-to-point and windows, and their busbw against NCCL's), devapi
# (NCCL's device API: a kernel compiled against nccl_device.h on weft's windows), storm (communicators
# aborted at random moments, STORM_S seconds), soak (checked mixed work for SOAK_S seconds, judged for drift), huge (all_reduce 2-8 GiB), scan (busbw per channel count, buffer
# size, p2p warp split), fit (tools/fit_curves.sh), floor (tools/launch_floor.cu and Nsight
# Compute on one rank), stalls (warp-state sampling of the one-rank kernel), final (the whole
# end-state check), multi, full and multiperf (machines of more than two GPUs), shared and
# sharedloop (4 ranks sharing the GPUs, process per rank, and the sweep in threads; REPEAT=n),
# suminline (Simple Ring sums, inlined kernel against outlined, 1 MiB - 1 GiB),
# midscan / crossover / tunecheck (mid-size protocol and tuning comparisons; tunecheck needs TUNE= a
# candidate NCCL_WEFT_TUNING), p2pchan (sendrecv/alltoall on every channel of a pair), sharedperf
# (Direct all_reduce variants, two ranks on one GPU: SHAREDPERF_VARIANTS="label:lib:VAR=v+..."), shm (the
# SHM transport: sweeps, and busbw against NCCL with NCCL_P2P_DISABLE=1 on 2+ GPUs), stackab
# (OLD=folder: an older library's stack need, memory and speed against these binaries), small (every
# collective 8 B - 2 MiB, graph and stream, against NCCL and OLD if set), destroy (communicators
# destroyed in threads mode while another one's kernel waits: P2P and SHM, 2 and 4 ranks), graphs
# (CUDA graph extras through the graph work pool, and the pool's growth; then without graph mixing),
# net (the network transport between ranks posing as two hosts, against NCCL's sockets).
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-/tmp/weft-gpu-batch}; L=$OUT/logs; mkdir -p $L
# The summary also goes to $OUT/summary.txt as it is printed: a call cut off by its time limit
# returns no stdout, and its logs may be too many files to come back (session 37 lost a call so).
exec > >(tee -a "$OUT/summary.txt") 2>&1
SUMMARY_TEE=$!
trap 'exec >&- 2>&-; wait $SUMMARY_TEE 2>/dev/null' EXIT  # the last lines reach the file before exit
B=build-gpu
NCCL=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
STAGES=${*:-correct latency}
NG=${NG:-$(nvidia-smi -L | grep -c "^GPU")}
if [ -n "${PREBUILT:-}" ]; then
  # Binaries built elsewhere (tools/prebuilt.sh) and carried: no build, ~7 minutes of device time
  # saved. Their run paths point at the build machine's folders, so the loader searches $B.
  B=$PREBUILT; export LD_LIBRARY_PATH=$B; echo "prebuilt: $(cat $B/BUILT_FROM 2>/dev/null)"
else
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA_ARCHS=90 > $L/cfg.log 2>&1
  t0=$SECONDS; cmake --build $B -j30 --target weft_shared coll_sweep iree_style_test weft_gpu_fault_test weft_gpu_misuse_test weft_gpu_abort_storm_test weft_gpu_soak_test weft_gpu_register_test weft_gpu_determinism_test weft_gpu_zero_copy_test weft_gpu_device_api_test weft-perf weft_kernel_harness > $L/build.log 2>&1
  rc=$?; echo "build rc=$rc $((SECONDS-t0)) s"; [ $rc = 0 ] || { grep -m5 error $L/build.log; exit 1; }
fi

sw() {  # label "VAR=value ..." coll_sweep-args...
  local label=$1 e=$2; shift 2
  env $e timeout 200 $B/tests/gpu/coll_sweep -g ${SWG:-$NG} --quick --timeout 25 "$@" > $L/sw-$label.log 2>&1
  echo "sweep $label ($e $*) rc=$?"; grep -E "FAIL|no progress" $L/sw-$label.log | head -4
}

stage_correct() {
  local h=$B/tests/gpu/weft_kernel_harness
  [ -x $h ] || h=$B-harness/tests/gpu/weft_kernel_harness  # prebuilt.sh keeps it apart
  if [ -x $h ]; then
    timeout 60 $h --mode correctness --proto ll --quick > $L/harness.log 2>&1; echo "harness LL rc=$?"
    timeout 60 $h --mode correctness --proto ll128 --quick > $L/harness128.log 2>&1
    echo "harness LL128 rc=$? failures: $(grep -c FAIL $L/harness128.log)"; grep -m3 FAIL $L/harness128.log
  else
    echo "no kernel harness in $B (not among the prebuilt binaries)"
  fi
  sweeps_all
}
# Every forced algorithm and protocol, and the clients.
sweeps_all() {
  sw default "X=1" -m threads,procs,initall
  sw ll "NCCL_PROTO=LL" -m threads
  sw ll128 "NCCL_PROTO=LL128" -m threads,procs
  sw tree "NCCL_ALGO=allreduce:tree NCCL_PROTO=Simple" -m threads
  sw treell "NCCL_ALGO=allreduce:tree NCCL_PROTO=LL" -m threads,procs
  sw treell128 "NCCL_ALGO=allreduce:tree NCCL_PROTO=LL128" -m threads
  sw direct "NCCL_ALGO=allreduce:direct,allgather:direct" -m threads,procs
  sw twoshot "NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1" -m threads
  sw general "NCCL_WEFT_SPECIAL_KERNELS=0" -m threads
  sw nopdl "NCCL_WEFT_PDL=0" -m threads
  stage_graphs
  clients
  stage_faults
  stage_misuse
  stage_register
  stage_determinism
  stage_zerocopy
  stage_devapi
  STORM_S=20 stage_storm
}

# CUDA graph extras with every launch's items in the graph work pool (8 items a buffer: reused
# often), and how many buffers the pool grew to (one INFO line per new buffer).
stage_graphs() {
  sw graphpool "NCCL_WEFT_INLINE_WORKS=0 NCCL_WEFT_GRAPH_WORK_ITEMS=8 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL" \
    -m threads,procs --no-sweep --no-selftest --extras graphs
  echo "graph work buffers, most per rank: $(grep -oE "graph work buffers: [0-9]+" $L/sw-graphpool.log |
    awk '{print $4}' | sort -n | tail -1) (of $(grep -c "graph work buffers:" $L/sw-graphpool.log) growth lines)"
  # Without the mixing event nodes only the library's per-graph records order the forked-capture
  # extra's launches (session 38: the old first-in-first-out records gave wrong results here).
  sw graphs-nomix "NCCL_GRAPH_MIXING_SUPPORT=0" -m threads,procs --no-sweep --no-selftest --extras graphs
}

stage_latency() {
  echo "== latency, us (all_reduce 8 B - 64 KiB; -t NG -g 1, then CUDA graph -G 10)"
  for m in "-t $NG -g 1" "-t $NG -g 1 -G 10"; do
    lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; lat weft-direct "NCCL_ALGO=allreduce:direct" $B $m
    lat weft-twoshot "NCCL_ALGO=allreduce:direct NCCL_WEFT_DIRECT_TWO_SHOT=1" $B $m
  done
  echo "== tuner picks (weft, all_reduce -g $NG)"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 1G -f 8 -c 0 -n 1 -w 0 -g $NG 2>&1 |
    grep -oE "AllReduce: [0-9]+ Bytes -> .*" | sort -u | sort -n -k2 | head -16
}

stage_perf() {
  echo "== busbw GB/s per size (weft-perf -g $NG -c 0): ops and sizes as labelled"
  perfv mid all_reduce,all_gather,reduce_scatter 256K 64M 4 20
  perfv big broadcast,reduce,sendrecv,alltoall,all_reduce,all_gather,reduce_scatter 64M 1G 4 8
}
stage_huge() { perfv huge all_reduce 2G 8G 4 3; }
# Where broadcast/sendrecv/all_reduce plateau below NCCL at 256 MiB - 1 GiB: busbw per setting.
stage_scan() {
  echo "== knob scan: busbw GB/s at 256M 1G (weft-perf -g $NG -c 0 -n 8)"
  for e in "X=1" "NCCL_MAX_NCHANNELS=16" "NCCL_MAX_NCHANNELS=24" "NCCL_MIN_NCHANNELS=32 NCCL_MAX_NCHANNELS=32" \
           "NCCL_BUFFSIZE=2097152" "NCCL_BUFFSIZE=8388608" "NCCL_WEFT_P2P_SEND_WARPS=7"; do
    for op in broadcast sendrecv all_reduce; do
      printf "%-44s %-10s " "$e" "$op"
      env $e LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf $op -g $NG -b 256M -e 1G -f 4 -c 0 -n 8 -w 2 2>&1 |
        grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $8} END{print ""}'
    done
  done
}
lat() {  # label "VAR=value ..." lib weft-perf-args...
  local label=$1 e=$2 lib=$3; shift 3
  printf "%-13s %-22s " "$label" "$*"
  env $e LD_LIBRARY_PATH=$lib timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 64K -f 8 -c 1 -n 300 -w 50 "$@" 2>&1 |
    grep -E "^ +[0-9]+ " | awk '{printf "%s:%s ", $1, $6} END{print ""}'
}
VARIANTS=${VARIANTS:-"nccl:$NCCL:X=1 weft:$B:X=1"}
perfv() {  # label ops -b -e -f -n: every "label:lib:VAR=value+VAR=value" of $VARIANTS (nccl first)
  for v in $VARIANTS; do
    IFS=: read -r label lib envs <<< "$v"; echo "### $label" >> $L/$1.log
    env ${envs//+/ } LD_LIBRARY_PATH=$lib timeout 200 $B/tools/weft-perf $2 ${PERF_MODE:--g $NG} -b $3 -e $4 -f $5 -c 0 -n $6 -w 2 >> $L/$1.log 2>&1
  done
  python3 tools/ratio_table.py $L/$1.log --ops $2
}
# Mid sizes (256 KiB - 64 MiB, the protocols issue's bar: >= 1.0x NCCL): weft's default against
# forced protocols and channel counts, the tuner's picks.
stage_midscan() {
  local ll128="NCCL_PROTO=LL128+NCCL_ALGO=ring"
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1 ll128:$B:$ll128 ll:$B:NCCL_PROTO=LL+NCCL_ALGO=ring simple:$B:NCCL_PROTO=Simple+NCCL_ALGO=ring \
    simple32:$B:NCCL_PROTO=Simple+NCCL_ALGO=ring+NCCL_MIN_NCHANNELS=32 ll128tuned:$B:NCCL_WEFT_TUNING=default.ll128=1" \
    perfv midscan all_reduce,all_gather,reduce_scatter 256K 64M 2 40
  echo "== tuner picks (weft, all_reduce -g $NG), default and with LL128 picked by default (default.ll128=1)"
  for e in "X=1" "NCCL_WEFT_TUNING=default.ll128=1"; do
    env $e NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf all_reduce -b 256K -e 64M -f 2 -c 0 -n 1 -w 0 -g $NG 2>&1 |
      grep -oE "AllReduce: [0-9]+ Bytes -> .*" | sort -u | sort -n -k2 | head -10
  done
}
# The Ring-sum kernels on Simple with every copy inlined against the outlined ones (session 19:
# NCCL_WEFT_INLINE_SUM_BYTES, 256 KiB per channel by default, fitted on ONE GPU): where they cross
# on NVLink, and whether the inlined one closes reduce's gap at 1 GiB (0.94x NCCL in session 12).
stage_suminline() {
  local r=NCCL_PROTO=Simple+NCCL_ALGO=ring
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1 inlined:$B:$r+NCCL_WEFT_INLINE_SUM_BYTES=1000000000000 \
    outlined:$B:$r+NCCL_WEFT_INLINE_SUM_BYTES=0" perfv suminline all_reduce,reduce_scatter,reduce 1M 1G 4 20
}
# sendrecv/alltoall on every channel of the pair instead of NCCL_WEFT_P2P_MAX_CHANNELS (24):
# sendrecv stays near 310 GB/s from 256 MiB while NCCL climbs to 364 at 1 GiB (sessions 7-9).
stage_p2pchan() {
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1 all:$B:NCCL_WEFT_P2P_MAX_CHANNELS=0" perfv p2pchan sendrecv,alltoall 16M 1G 4 8
}
# Kernel-structure variants timed with two ranks on ONE GPU (threads, GPU sharing): for machines of
# one GPU. The peers' writes cross L2 instead of NVLink, so only differences between rows count.
stage_sharedperf() {
  local s=NCCL_WEFT_ALLOW_GPU_SHARING=1+NCCL_ALGO=allreduce:direct
  VARIANTS="nccl:$B:$s ${SHAREDPERF_VARIANTS:-}" PERF_MODE="-t 2 -g 1" perfv sharedperf all_reduce 8 2M 2 ${SHAREDPERF_N:-200}
  echo "(the row labelled nccl is weft's base variant here; times in us:)"
  awk '/^###/{l=$2} /^ +[0-9]+ +[0-9]+ /{t[l]=t[l] " " $6} END{for (k in t) print k ":" t[k]}' $L/sharedperf.log
}
# Session 11, the general kernels' stack: the libnccl.so.2 in folder OLD against these binaries.
# Per library: the stack its kernels need (creation log), a communicator's device memory
# (tools/comm_memory.py, world of one; NCCL's too), then busbw of the general kernels
# (NCCL_WEFT_SPECIAL_KERNELS=0) and of the defaults, the row labelled nccl being OLD.
stage_stackab() {
  local old=${OLD:?set OLD to a folder with an older libnccl.so.2} m="-g $NG" sh=X=1
  if [ "$NG" = 1 ]; then m="-t 2 -g 1"; sh=NCCL_WEFT_ALLOW_GPU_SHARING=1; fi
  local ops=all_reduce,reduce,broadcast,reduce_scatter,all_gather,sendrecv
  for lib in $old $B; do
    echo "== $lib: $(cat $lib/BUILT_FROM 2>/dev/null)"
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT LD_LIBRARY_PATH=$lib timeout 60 $B/tools/weft-perf all_reduce -g 1 -b 8 -e 8 \
      -n 1 -w 0 2>&1 | grep -m1 -E "stack (limit|per thread)" | sed 's/^.*NCCL INFO //'
    LD_PRELOAD=$lib/libnccl.so.2 timeout 120 python3 tools/comm_memory.py "$lib" 2>&1 | tail -1
  done
  LD_PRELOAD=$NCCL/libnccl.so.2 timeout 120 python3 tools/comm_memory.py "NCCL" 2>&1 | tail -1
  echo "== general kernels (NCCL_WEFT_SPECIAL_KERNELS=0), new/old busbw ($m)"
  VARIANTS="nccl:$old:$sh+NCCL_WEFT_SPECIAL_KERNELS=0 new:$B:$sh+NCCL_WEFT_SPECIAL_KERNELS=0" PERF_MODE="$m" \
    perfv stackgen $ops 8 256M 8 ${STACKAB_N:-20}
  echo "== defaults, new/old busbw ($m)"
  VARIANTS="nccl:$old:$sh new:$B:$sh" PERF_MODE="$m" perfv stackdef $ops 8 256M 8 ${STACKAB_N:-20}
}
# Small and mid sizes of every collective, us per call, one thread per GPU, in a CUDA graph and from
# the stream, two rounds: NCCL, these binaries and (OLD=folder) an older libnccl.so.2.
stage_small() {
  echo "== us at 8 32 128 512 2K 8K 32K 128K 512K 2M (-t $NG -g 1; graph = -G 10)"
  local libs="nccl:$NCCL weft:$B"; [ -n "${OLD:-}" ] && libs="$libs old:$OLD"
  for op in all_reduce all_gather reduce_scatter broadcast reduce; do
    for g in "-G 10" ""; do
      for round in 1 2; do
        for v in $libs; do
          printf "%-14s %-5s %-6s" $op ${v%%:*} "$([ -n "$g" ] && echo graph || echo stream)"
          LD_LIBRARY_PATH=${v#*:} timeout 100 $B/tools/weft-perf $op -t $NG -g 1 $g -b 8 -e 4M -f 4 -c 0 -n 300 -w 30 2>&1 |
            awk '/^ +[0-9]+ +[0-9]+ /{printf " %s", $6} END{print ""}'
        done
      done
    done
  done
}
# Where Ring/Simple should take over from Direct/LL (all_reduce, one thread per GPU).
stage_crossover() {
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1 direct:$B:NCCL_ALGO=allreduce:direct ringll:$B:NCCL_ALGO=ring+NCCL_PROTO=LL \
    ringsimple:$B:NCCL_ALGO=ring+NCCL_PROTO=Simple" PERF_MODE="-t $NG -g 1" perfv crossover all_reduce 16K 8M 2 200
}
# A candidate set of tuning constants (TUNE, NCCL_WEFT_TUNING syntax) against the defaults and NCCL.
stage_tunecheck() {
  local t="NCCL_WEFT_TUNING=${TUNE:?set TUNE to the candidate, e.g. TUNE=\"base.ring.ll=8.6;bweff.direct.ll=0.435\"}"
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1 tuned:$B:$t" perfv tunemid all_reduce,all_gather,reduce_scatter,broadcast,reduce 64K 64M 2 60
  VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1 tuned:$B:$t" PERF_MODE="-t $NG -g 1" perfv tunet2 all_reduce,all_gather,reduce_scatter 64K 16M 2 200
  echo "== latency, us (all_reduce 8 B - 64 KiB)"
  for m in "-t $NG -g 1" "-t $NG -g 1 -G 10"; do lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; lat tuned "$t" $B $m; done
  echo "== tuner picks with the candidate (all_reduce, all_gather, reduce_scatter, broadcast, reduce; -g $NG)"
  for op in all_reduce all_gather reduce_scatter broadcast reduce; do
    env "$t" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf $op -b 8 -e 64M -f 4 -c 0 -n 1 -w 0 -g $NG 2>&1 |
      grep -oE "[A-Za-z]+: [0-9]+ Bytes -> .*" | sort -u | sort -n -k2 | sed -E 's/^([A-Za-z]+): ([0-9]+) Bytes.*\(([^,]+),.*/\1 \2 \3/' |
      awk '{o=$1; printf "%s:%s ", $2, $3} END {print " (" o ")"}'
  done
}
stage_fit() { bash tools/fit_curves.sh $B $NG | tee $L/fit.txt; }
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
  nvcc -O3 -arch=sm_90 -o /tmp/launch_floor tools/launch_floor.cu -lcuda && CUDA_VISIBLE_DEVICES=0 /tmp/launch_floor | tee $L/floor.txt
  ncu_kernels one "X=1" all_reduce -b 8 -e 8 -c 0 -n 40 -w 5 -t 1 -g 1
  ncu_kernels onegen "NCCL_WEFT_SPECIAL_KERNELS=0" all_reduce -b 8 -e 8 -c 0 -n 40 -w 5 -t 1 -g 1
  ncu_kernels one32k "X=1" all_reduce -b 32K -e 32K -c 0 -n 40 -w 5 -t 1 -g 1
  env LD_LIBRARY_PATH=$NCCL timeout 100 ncu --clock-control none --launch-skip 30 --launch-count 2 --metrics gpu__time_duration.sum \
    $B/tools/weft-perf all_reduce -b 8 -e 8 -c 0 -n 40 -w 5 -t 1 -g 1 > $L/ncu-nccl.log 2>&1
  echo "ncu nccl one rank rc=$?"; grep -E "^  [A-Za-z_].*\(|gpu__time_duration" $L/ncu-nccl.log | head -6
  echo "== latency, us (all_reduce 8 B - 64 KiB)"
  for m in "-t $NG -g 1" "-t $NG -g 1 -G 10" "-t 1 -g 1 -G 10"; do lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; done
  lat weft-direct-gen "NCCL_WEFT_SPECIAL_KERNELS=0" $B -t $NG -g 1 -G 10
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

# One GPU (the copy path), the IREE-style and PyTorch clients.
clients() {
  SWG=1 sw one "X=1" -m threads,initall
  timeout 60 $B/tests/gpu/iree_style_test -g $NG > $L/iree.log 2>&1; echo "iree rc=$?"
  timeout 200 python3 tests/gpu/torch_dist_test.py --lib $B/libnccl.so.2 --expect-weft --world $NG > $L/torch.log 2>&1
  echo "torch rc=$?"; tail -2 $L/torch.log
  # Two processes on GPUs 0 and 1 (on one GPU rank 1 sees none, and rank 0 waits 60 s for it).
  if [ "$NG" -lt 2 ]; then echo "settings mismatch: skipped (needs 2 GPUs)"; return 0; fi
  timeout 150 python3 tests/gpu/settings_mismatch_test.py --lib $B/libnccl.so.2 > $L/mismatch.log 2>&1
  echo "settings mismatch rc=$?"; grep -E "^(FAIL|PASS mismatch rank 0)" $L/mismatch.log | head -3
}
# Peer failure: a rank's process killed or stopped during collectives, send/recv and graph replays
# (tests/gpu/fault_test.cc), 3 ranks over the GPUs (sharing them on 1 or 2).
stage_faults() {
  timeout 400 $B/tests/gpu/weft_gpu_fault_test -n ${FAULT_RANKS:-3} -g $NG > $L/faults.log 2>&1
  echo "faults rc=$?: $(tail -1 $L/faults.log)"; grep -E "^(FAIL|FAILED)" $L/faults.log | head -6
}

# Bad and unusual buffers (tests/gpu/misuse_test.cc): weft judged, then NCCL observed.
stage_misuse() {
  timeout 200 $B/tests/gpu/weft_gpu_misuse_test -n $NG > $L/misuse.log 2>&1
  echo "misuse rc=$?: $(tail -1 $L/misuse.log)"; grep -E "FAIL" $L/misuse.log | head -6
  LD_LIBRARY_PATH=$NCCL timeout 200 $B/tests/gpu/weft_gpu_misuse_test -n $NG --observe > $L/misuse-nccl.log 2>&1
  echo "misuse with NCCL (observed) rc=$?"; cat $L/misuse-nccl.log
}

# ncclCommRegister / ncclCommDeregister (tests/gpu/register_test.cc), NCCL observed; then PyTorch's
# allocator hook registering its segments (torch_dist_test.py --register).
stage_register() {
  timeout 120 $B/tests/gpu/weft_gpu_register_test -n $NG > $L/register.log 2>&1
  echo "register rc=$?: $(tail -1 $L/register.log)"; grep -E "FAIL" $L/register.log | head -6
  LD_LIBRARY_PATH=$NCCL timeout 120 $B/tests/gpu/weft_gpu_register_test -n $NG --observe > $L/register-nccl.log 2>&1
  echo "register with NCCL (observed) rc=$?"; cat $L/register-nccl.log
  timeout 300 python3 tests/gpu/torch_dist_test.py --lib $B/libnccl.so.2 --expect-weft --register --world $NG \
    > $L/torch-register.log 2>&1
  echo "torch_dist_test --register rc=$?"; grep -E "PASS|FAIL" $L/torch-register.log | tail -8
}

# Zero-copy point-to-point from registered buffers (tests/gpu/zero_copy_test.cc): processes and
# one thread, cudaMalloc and ncclMemAlloc, eager and graphs; then sendrecv/alltoall busbw with
# registered buffers (-R 1) against NCCL's registered path, and weft unregistered for reference.
stage_zerocopy() {
  local n=$(( NG > 1 ? NG : 2 ))
  for m in procs threads; do
    NCCL_WEFT_ALLOW_GPU_SHARING=1 timeout 300 $B/tests/gpu/weft_gpu_zero_copy_test -n $n -m $m --expect-direct \
      > $L/zerocopy-$m.log 2>&1
    echo "zero-copy -n $n -m $m rc=$?: $(tail -1 $L/zerocopy-$m.log)"; grep -E "FAIL|direct-count" $L/zerocopy-$m.log | head -6
  done
  [ "$NG" -ge 2 ] || return 0  # NCCL refuses ranks that share a GPU
  echo "== sendrecv/alltoall busbw, registered buffers (-R 1: ncclMemAlloc + ncclCommRegister) and plain"
  PERF_MODE="-g $NG -R 1" VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1" perfv zc-registered sendrecv,alltoall 1M 1G 4 10
  echo "== the same with windows (-R 2: ncclCommWindowRegister, as nccl-tests); all_reduce/all_gather too (NCCL's symmetric kernels)"
  PERF_MODE="-g $NG -R 2" VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1" perfv zc-windows sendrecv,alltoall,all_reduce,all_gather 1M 1G 4 10
  PERF_MODE="-g $NG" VARIANTS="nccl:$NCCL:X=1 weft:$B:X=1" perfv zc-plain sendrecv,alltoall 1M 1G 4 10
}

# NCCL's device API on weft: a kernel compiled against NCCL's nccl_device.h (window pointers, LSA
# barriers, the LSA all-to-all, ncclFindWindow), one process per rank and one thread for all.
stage_devapi() {
  local n=$(( NG > 1 ? NG : 2 ))
  for m in procs threads; do
    NCCL_WEFT_ALLOW_GPU_SHARING=1 timeout 120 $B/tests/gpu/weft_gpu_device_api_test -n $n -m $m > $L/devapi-$m.log 2>&1
    echo "device API -n $n -m $m rc=$?: $(tail -1 $L/devapi-$m.log)"; grep -E "FAIL" $L/devapi-$m.log | head -4
  done
}

# The same bits every time, on every rank, after other calls and in graphs (tests/gpu/determinism_test.cc),
# with the tuner's choices and each forced algorithm and protocol; NCCL observed where it can run (3+ GPUs).
stage_determinism() {
  local n=$(( NG > 2 ? NG : 3 ))  # 3 ranks at least: two cannot show an order
  for e in "X=1" "NCCL_PROTO=LL" "NCCL_PROTO=LL128" "NCCL_ALGO=allreduce:tree" "NCCL_ALGO=allreduce:direct"; do
    env $e timeout 200 $B/tests/gpu/weft_gpu_determinism_test -n $n > $L/determinism.log 2>&1
    echo "determinism ($e) -n $n rc=$?: $(tail -1 $L/determinism.log)"; grep -E "FAIL|differs" $L/determinism.log | head -6
  done
  NCCL_ALGO=allreduce:direct timeout 200 $B/tests/gpu/weft_gpu_determinism_test -n $n --shape-independent \
    > $L/determinism-shape.log 2>&1
  echo "determinism, Direct independent of the size: rc=$?: $(tail -1 $L/determinism-shape.log)"
  if [ "$NG" -gt 2 ]; then
    LD_LIBRARY_PATH=$NCCL timeout 200 $B/tests/gpu/weft_gpu_determinism_test -n $NG --observe > $L/determinism-nccl.log 2>&1
    echo "determinism with NCCL (observed) rc=$?"; grep -E "differ" $L/determinism-nccl.log | head -8
  fi
}

# Communicators made and aborted at random moments (tests/gpu/abort_storm_test.cc), STORM_S seconds.
stage_storm() {
  timeout $((${STORM_S:-60} + 150)) $B/tests/gpu/weft_gpu_abort_storm_test -n ${STORM_RANKS:-2} -g $NG -s ${STORM_S:-60} > $L/storm.log 2>&1
  echo "abort storm rc=$?: $(tail -1 $L/storm.log)"; grep -E "^(FAIL|rank)" $L/storm.log | head -8
}

# Soak (tests/gpu/soak_test.cc): checked collectives of mixed sizes on several communicators for
# SOAK_S seconds, judged for drift (fds, threads, memory, latency); with 2+ GPUs NCCL runs it too.
stage_soak() {
  local n=${SOAK_RANKS:-2}
  timeout $((${SOAK_S:-120} + 150)) $B/tests/gpu/weft_gpu_soak_test -n $n -g $NG -s ${SOAK_S:-120} > $L/soak.log 2>&1
  echo "soak rc=$?: $(tail -1 $L/soak.log)"; grep -E "^(FAIL|rank)" $L/soak.log | head -12
  if [ "$NG" -ge "$n" ]; then
    LD_LIBRARY_PATH=$NCCL timeout $((${SOAK_S:-120} + 150)) $B/tests/gpu/weft_gpu_soak_test -n $n -g $NG -s ${SOAK_S:-120} > $L/soak-nccl.log 2>&1
    echo "soak with NCCL rc=$?: $(tail -1 $L/soak-nccl.log)"; grep -E "^(FAIL|rank)" $L/soak-nccl.log | head -12
  fi
}

# The end state: latency (PDL on and off), host time per call, every sweep (and 4 ranks on the
# GPUs when there are fewer than 4), busbw against NCCL.
stage_final() {
  echo "== latency, us (all_reduce 8 B - 64 KiB); weft-nopdl = NCCL_WEFT_PDL=0"
  for m in "-t $NG -g 1" "-t $NG -g 1 -G 10" "-t 1 -g 1 -G 10"; do
    lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; lat weft-nopdl "NCCL_WEFT_PDL=0" $B $m
  done
  host_time
  sweeps_all
  if [ "$NG" -lt 4 ]; then stage_shared; fi  # the only 4-rank coverage on small machines
  perfv big broadcast,reduce,sendrecv,alltoall,all_reduce,all_gather,reduce_scatter 64M 1G 4 8
  perfv mid all_reduce,all_gather,reduce_scatter,broadcast,reduce 256K 64M 4 40
}
host_time() {
  echo "== host time per operation in the enqueue calls (-t $NG -g 1, 8 B and 32 KiB)"
  for v in "nccl:$NCCL" "weft:$B"; do
    printf "%-6s " ${v%%:*}; WEFT_PERF_HOST_TIME=1 LD_LIBRARY_PATH=${v#*:} timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 32K -f 4096 -c 0 -n 300 -w 50 -t $NG -g 1 2>&1 |
      grep -oE "host [0-9.]+ us" | tr '\n' ' '; echo
  done
}

# Machines of more than two GPUs: how they are linked and what weft made of it (rings, trees,
# channels), every sweep at NG ranks, the default sweep at NG-1 ranks (an odd count when NG is
# even); full: the whole sweep (all types, ops and counts) at NG ranks.
stage_multi() {
  nvidia-smi topo -m | tee $L/topo.txt | head -12
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf all_reduce -g $NG -b 1M -e 1M -c 1 -n 2 -w 1 \
    > $L/graph.log 2>&1; echo "graph dump rc=$?"; grep -iE "ring|tree|channels|pattern" $L/graph.log | head -16
  sweeps_all
  SWG=$((NG - 1)) sw odd "X=1" -m threads,procs
}
# More ranks than GPUs (NCCL_WEFT_ALLOW_GPU_SHARING=1, test-only): 4 ranks on one or two GPUs
# exercise what two ranks never do: pairs that are no ring neighbours, whose point-to-point-only
# connections are made on first use (NCCL_RUNTIME_CONNECT=1) or at creation (=0).
# firstuse: the extras run first on new communicators, so a captured all-to-all makes them.
# threads4: ranks sharing a GPU inside one process, so one CUDA context. They hung at their first
# collectives until weft (and the sweep) loaded their kernels and raised the stack limit before the
# first launch (session 10). Without the extras: those create, split, destroy and abort
# communicators, whose CUDA calls may wait for the whole context while another rank's kernel waits
# for the calling rank (NCCL refuses shared GPUs outright; procs mode runs the extras).
stage_shared() {
  local p2p=AlltoAll,Gather,Scatter,SendRecvRing,SendRecvMany,SendRecvSelf sh=NCCL_WEFT_ALLOW_GPU_SHARING=1
  SWG=4 sw shared4 "$sh NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P" -m procs
  SWG=4 sw threads4 "$sh" -m threads --no-extras
  grep -hoE "rank 0: (connection memory.*|made the point-to-point.*|mapped the point-to-point.*)" $L/sw-shared4.log |
    sort | uniq -c | head -8
  SWG=4 sw eager4 "$sh NCCL_RUNTIME_CONNECT=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P" -m procs --colls $p2p
  grep -hoE "rank 0: (connection memory.*|made the point-to-point.*)" $L/sw-eager4.log | sort | uniq -c | head -4
  SWG=4 sw firstuse4 "$sh NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=P2P" -m procs --no-selftest --no-sweep
  grep -hE "CUDA graph|made the point-to-point" $L/sw-firstuse4.log | sed 's/^.*NCCL INFO //' | sort | uniq -c | head -8
}
# The SHM transport (connection memory in /dev/shm, mapped for the GPUs). One GPU: NCCL_WEFT_SHM=2
# puts every peer on it (ranks share the GPU); 2+ GPUs: NCCL_P2P_DISABLE=1 makes the topology ask
# for it, and the busbw is compared with NCCL's own SHM transport under the same setting.
stage_shm() {
  local e="NCCL_WEFT_SHM=2 NCCL_WEFT_ALLOW_GPU_SHARING=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,SHM" g=2
  if [ "$NG" -ge 2 ]; then e="NCCL_WEFT_SHM=1 NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,SHM"; g=$NG; fi
  SWG=$g sw shm "$e" -m threads,procs
  grep -hoE "rank 0: .*(host shared memory|NCCL_WEFT_SHM).*" $L/sw-shm.log | sort | uniq -c | head -4
  SWG=$g sw shm-ll "$e NCCL_PROTO=LL" -m threads
  SWG=$g sw shm-eager "$e NCCL_RUNTIME_CONNECT=0" -m procs --no-extras
  echo "shm segments left in /dev/shm: $(ls /dev/shm | grep -c '^weft-')"
  [ "$NG" -ge 2 ] || return 0  # NCCL refuses ranks that share a GPU
  PERF_MODE="-g $NG" VARIANTS="nccl:$NCCL:NCCL_P2P_DISABLE=1 weft:$B:NCCL_P2P_DISABLE=1+NCCL_WEFT_SHM=1" \
    perfv shm all_reduce,all_gather,sendrecv 8 256M 8 10
}
# The network transport between ranks posing as hosts (WEFT_TEST_HOSTS / WEFT_PERF_HOSTS set
# NCCL_HOSTID per process; one GPU is shared with NCCL_WEFT_ALLOW_GPU_SHARING): sweeps with 2 ranks
# on 2 "hosts" and 4 ranks on 2 (P2P inside, network between), the fault scenarios, and busbw
# against NCCL's socket transport posing the same way (NCCL may refuse ranks that share a GPU).
stage_net() {
  local e="WEFT_TEST_HOSTS=2 NCCL_WEFT_ALLOW_GPU_SHARING=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
  local g=$(( NG >= 2 ? NG : 2 ))
  SWG=$g sw net "$e" -m procs --no-extras
  grep -hoE "rank 0: .*(through the network|send and .* receive connection).*" $L/sw-net.log | sort | uniq -c | head -4
  SWG=$g sw net-extras "$e" -m procs
  SWG=4 sw net4 "$e" -m procs --no-extras
  SWG=3 sw net3 "${e/WEFT_TEST_HOSTS=2/WEFT_TEST_HOSTS=3}" -m procs  # every pair across hosts, extras
  # LL lines through the proxies (found by their flags), forced: ring, tree, and with the extras.
  SWG=$g sw net-ll "$e NCCL_PROTO=LL" -m procs
  SWG=4 sw net4-ll "$e NCCL_PROTO=LL" -m procs --no-extras
  SWG=4 sw net4-treell "$e NCCL_ALGO=allreduce:tree NCCL_PROTO=LL" -m procs --no-extras  # heads with 2 children
  SWG=3 sw net3-ll "${e/WEFT_TEST_HOSTS=2/WEFT_TEST_HOSTS=3} NCCL_PROTO=LL" -m procs --no-extras
  # The scenarios whose detection works across hosts (the others rely on this host's view of its
  # peers: SIGSTOP seen in /proc, calls compared through shared memory).
  for f in kill-allreduce kill-sendrecv kill-graph kill-finalize kill-shrink kill-window kill-sendrecv-reg \
    stop-continue revoke-shrink shrink-alive; do
    WEFT_TEST_HOSTS=3 timeout 100 $B/tests/gpu/weft_gpu_fault_test -n 3 -g $NG --only $f >> $L/faults-net.log 2>&1
    echo "fault $f across posed hosts rc=$?"
  done
  grep -E "^(FAIL|FAILED)" $L/faults-net.log | head -8
  PERF_MODE="-p 2 -g 1" VARIANTS="nccl:$NCCL:WEFT_PERF_HOSTS=2+NCCL_WEFT_ALLOW_GPU_SHARING=1 \
    weft:$B:WEFT_PERF_HOSTS=2+NCCL_WEFT_ALLOW_GPU_SHARING=1" perfv net all_reduce,all_gather,sendrecv 8 64M 8 10
}
# Communicators destroyed while another communicator's kernel waits for the destroying rank (threads
# mode, ranks sharing GPUs): the split/shrink extras over P2P and SHM with 2 and 4 ranks (session 33:
# frees under ncclCommDestroy waited for the device; session 34: so did the SHM segments' unregister).
# On a hang the log holds every thread's stack.
stage_destroy() {
  local sh="NCCL_WEFT_ALLOW_GPU_SHARING=1" e g t
  for g in 2 4; do
    for t in p2p shm; do
      e=$sh; [ $t = shm ] && e="$sh NCCL_WEFT_SHM=2"
      SWG=$g sw destroy-$t$g "$e" -m threads --no-sweep
      grep -E "^#[0-9]+ .* in (cuMem|cudaFree|cudaHost|cudaStreamSync|pncclComm)" $L/sw-destroy-$t$g.log | head -8
    done
  done
}
# The quick sweep at 4 shared ranks, REPEAT times (session 9: a reset step counter showed in 3 runs of 6).
stage_sharedloop() {
  for i in $(seq ${REPEAT:-5}); do SWG=4 sw loop4-$i "NCCL_WEFT_ALLOW_GPU_SHARING=1" -m procs --no-extras; done
}
stage_full() {
  env timeout ${FULL_S:-500} $B/tests/gpu/coll_sweep -g $NG --timeout 60 -m ${FULL_MODES:-threads} > $L/sw-full.log 2>&1
  echo "full sweep -g $NG ${FULL_MODES:-threads} rc=$?"; grep -E "FAIL|no progress|coll_sweep mode" $L/sw-full.log | head -6
}
stage_multiperf() {
  echo "== latency, us (all_reduce 8 B - 64 KiB)"
  for m in "-t $NG -g 1" "-t $NG -g 1 -G 10"; do lat nccl "X=1" $NCCL $m; lat weft "X=1" $B $m; done
  host_time
  echo "== tuner picks (weft, all_reduce -g $NG)"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING LD_LIBRARY_PATH=$B timeout 60 $B/tools/weft-perf all_reduce -b 8 -e 1G -f 8 -c 0 -n 1 -w 0 -g $NG 2>&1 |
    grep -oE "AllReduce: [0-9]+ Bytes -> .*" | sort -u | sort -n -k2 | head -16
  perfv big broadcast,reduce,sendrecv,alltoall,all_reduce,all_gather,reduce_scatter 64M 1G 4 8
  perfv mid all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall 8K 64M 4 40
}

for s in $STAGES; do
  t0=$SECONDS; echo "=== stage $s"; "stage_$s"; echo "=== stage $s took $((SECONDS-t0)) s"
done
