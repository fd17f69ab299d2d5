#!/usr/bin/env bash
# Builds the GPU-machine binaries here (Release, sm_90) from a snapshot of the working tree, so
# that a device call can carry them instead of spending ~7 of its minutes building:
#   bash tools/prebuilt.sh [name]          # snapshot -> /tmp/weft-snap/<name>, binaries -> scratch/pre,
#                                          # the kernel harness -> scratch/pre-harness
#   WEFT_PREBUILT_CMAKE_ARGS=-DWEFT_DEVICE_PROBE=ON WEFT_PREBUILT_OUT=scratch/probe \
#     bash tools/prebuilt.sh probe         # extra CMake options, another output folder
#   device: carry ["scratch/pre"], run `PREBUILT=scratch/pre bash tools/gpu_batch.sh <stages>`
# The snapshot (tracked and untracked files, not ignored ones) lets the tree be edited while the
# build runs. Binaries are stripped of host debug information (~30 MB in all; carry takes 64 MiB).
set -eu
cd "$(dirname "$0")/.."
name=${1:-snap}
snap=/tmp/weft-snap/$name
mkdir -p "$snap"
# Only files whose content changed are copied, and they get the time of the copy: with the tree's
# own times, a file edited while an earlier build of the snapshot ran could look older than its
# object, and ninja would keep the stale one (session 46 carried an old test binary so).
stage=$(mktemp -d)
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$stage"
(cd "$stage" && find . -type f -print0) | while IFS= read -r -d '' f; do
  cmp -s "$stage/$f" "$snap/$f" || { mkdir -p "$(dirname "$snap/$f")" && cp "$stage/$f" "$snap/$f"; }
done
rm -rf "$stage"
# A file deleted from the tree since the snapshot's last build must go there too (CMake globs sources).
for d in src include tests tools cmake; do
  [ -d "$snap/$d" ] || continue
  comm -13 <(git ls-files -co --exclude-standard -- $d | sort) <(cd "$snap" && find $d -type f | sort) |
    while read -r f; do rm -f "$snap/$f"; done
done
desc="$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo "+$(git diff HEAD | sha1sum | cut -c1-8)")"
cd "$snap"
cmake -S . -B build-rel -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA_ARCHS=90 ${WEFT_PREBUILT_CMAKE_ARGS:-} > cfg.log
t0=$SECONDS
cmake --build build-rel -j"$(nproc)" --target weft_shared coll_sweep iree_style_test weft_gpu_fault_test weft_gpu_misuse_test weft_gpu_abort_storm_test weft_gpu_soak_test weft_gpu_register_test weft_gpu_determinism_test weft_gpu_zero_copy_test weft_gpu_device_api_test weft_gpu_memory_test weft-perf weft-status weft_kernel_harness weft_loop_net_plugin > build.log
echo "built $desc in $((SECONDS - t0)) s"
cd - > /dev/null
out=${WEFT_PREBUILT_OUT:-scratch/pre}
rm -rf $out && mkdir -p $out/tools $out/tests/gpu
strip --strip-debug -o $out/libnccl.so.2 "$snap"/build-rel/libnccl.so.2.28.9
strip --strip-debug -o $out/tools/weft-perf "$snap"/build-rel/tools/weft-perf
strip --strip-debug -o $out/tools/weft-status "$snap"/build-rel/bin/weft-status
# The test network plugin (TCP over loopback), for NCCL_NET_PLUGIN=$out/libnccl-net-weftloop.so runs.
strip --strip-debug -o $out/libnccl-net-weftloop.so "$snap"/build-rel/tests/unit/net_plugin/libnccl-net-weftloop.so
for t in coll_sweep iree_style_test weft_gpu_fault_test weft_gpu_misuse_test weft_gpu_abort_storm_test weft_gpu_soak_test weft_gpu_register_test weft_gpu_determinism_test weft_gpu_zero_copy_test weft_gpu_device_api_test weft_gpu_memory_test; do strip --strip-debug -o $out/tests/gpu/$t "$snap"/build-rel/tests/gpu/$t; done
# The kernel harness carries every kernel too (~43 MB, as the library): with it one folder would
# pass the 64 MiB carry limit, so it goes to a folder of its own (carry it in another call).
rm -rf $out-harness && mkdir -p $out-harness/tests/gpu
strip --strip-debug -o $out-harness/tests/gpu/weft_kernel_harness "$snap"/build-rel/tests/gpu/weft_kernel_harness
echo "$desc built $(date -u +%FT%TZ)" > $out/BUILT_FROM
cp $out/BUILT_FROM $out-harness/
du -sh $out $out-harness
