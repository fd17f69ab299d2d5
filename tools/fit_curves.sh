#!/usr/bin/env bash
# Measures weft's collective times per forced (algorithm, protocol) on this machine's GPUs and
# prints them as data lines for tests/unit/data/tuning_fit.py:
#     func algo proto bytes microseconds fit source
# Small sizes run inside a CUDA graph (source "graph": GPU time without the host's launch cost),
# large ones without ("g2": one thread drives both GPUs). Collect the output into a data file
# beside the machine's "config" lines (see tuning-baseline-h200x2.txt), then run tuning_fit.py.
#   bash tools/fit_curves.sh BUILD_DIR [NGPUS]        (needs weft-perf and libnccl.so.2 in BUILD_DIR)
# Ring/LL128 curves are included (forced through NCCL_PROTO; the tuner picks LL128 on its own only
# once default.ll128 is fitted to 1, see src/graph/tuning_constants.cc).
set -u
B=${1:?usage: fit_curves.sh BUILD_DIR [NGPUS]}
G=${2:-2}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# curve FUNC ALGO PROTO SOURCE MINBYTES MAXBYTES [ENV...]: one weft-perf run, one line per size.
curve() {
  local func=$1 algo=$2 proto=$3 source=$4 lo=$5 hi=$6
  shift 6
  local op graph=() iters=(-n 20 -w 5) layout=(-g "$G")
  case $func in
    allreduce) op=all_reduce ;; allgather) op=all_gather ;; reducescatter) op=reduce_scatter ;;
    *) op=$func ;;
  esac
  # CUDA graphs with one thread per GPU, as gpu_batch.sh's latency stage measures them. (Until
  # session 5 weft-perf -g 2 -G failed: it instantiated one GPU's graph while the other still
  # captured, so these curves printed nothing.)
  [ "$source" = graph ] && graph=(-G 20) && iters=(-n 50 -w 10) && layout=(-t "$G" -g 1)
  env "$@" NCCL_ALGO="$algo" NCCL_PROTO="$proto" LD_LIBRARY_PATH="$B" \
    timeout 120 "$B/tools/weft-perf" "$op" "${layout[@]}" -b "$lo" -e "$hi" -f 4 -c 0 "${iters[@]}" "${graph[@]}" 2>&1 |
    awk -v f="$func" -v a="$algo" -v p="$proto" -v s="$source" \
      '$1 ~ /^[0-9]+$/ && $6 ~ /^[0-9.]+$/ { printf "%s %s %s %s %s fit %s\n", f, a, tolower(p), $1, $6, s }'
}

echo "# weft $(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null), $G GPUs, $(date -u +%F)"
curve allreduce ring LL graph 8 1M
curve allreduce ring LL g2 4M 64M
curve allreduce ring Simple graph 16K 1M
curve allreduce ring Simple g2 2M 4G
curve allreduce tree Simple g2 2M 4G
curve allreduce tree LL graph 8 1M
curve allreduce direct LL graph 8 4M
curve allreduce direct LL graph 8 4M NCCL_WEFT_DIRECT_TWO_SHOT=1 | sed 's/ direct ll / direct ll-twoshot /'
curve allgather direct LL graph 8 8M
curve allreduce ring LL128 graph 8 1M
curve allreduce ring LL128 g2 2M 1G
for f in broadcast reduce allgather reducescatter; do curve $f ring Simple g2 1M 2G; done
