#!/usr/bin/env bash
# The network proxy and its unit tests under ThreadSanitizer, in about three minutes on two cores
# (tools/sanitize.sh thread builds everything and takes ~35): the proxy is host code on threads of
# its own that shares counters and slots with the GPU and the caller, so a race there is worth a
# quick look after each change to src/proxy.
#   bash tools/tsan_net.sh [main-build-dir (build)]   # needs the main build's generated headers
# Exits non-zero if a test fails or TSan reports anything.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
main="$(cd "${1:-$here/build}" && pwd)"
out="$main-tsan-net"
mkdir -p "$out"
src=(bootstrap/wire.cc bootstrap/frame_reader.cc bootstrap/unique_id.cc bootstrap/socket.cc bootstrap/interfaces.cc
     bootstrap/root.cc bootstrap/limits.cc core/log.cc core/param.cc)
src=("${src[@]/#/$here/src/}" "$here"/src/proxy/*.cc "$here"/src/transport/net/net_plugin.cc)
# The plugin proxy's tests load the main build's test plugin (not instrumented: what it does to the
# slots is not seen, but every hand-over through the proxy's counters is).
tests=("$here"/tests/unit/net_proxy*_test.cc "$here"/tests/unit/net_wire_test.cc "$here"/tests/unit/plugin_proxy_test.cc)
cuda_inc=/usr/local/cuda/include
g++ -std=c++17 -O1 -g -fsanitize=thread -I"$here/src" -I"$main/include" -I"$cuda_inc" \
  -DWEFT_NET_PLUGIN_DIR="\"$main/tests/unit/net_plugin\"" "${src[@]}" "${tests[@]}" \
  -lgtest -lgtest_main -lpthread -ldl -o "$out/net_tsan"
status=0
TSAN_OPTIONS="halt_on_error=0 ${TSAN_OPTIONS:-}" "$out/net_tsan" > "$out/tsan.log" 2>&1 || status=$?
reports=$(grep -c "WARNING: ThreadSanitizer" "$out/tsan.log" || true)
echo "weft tsan-net: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$out/tsan.log" | head -2 | tr '\n' ' ')$reports report(s); log $out/tsan.log"
[ "$status" -eq 0 ] && [ "$reports" -eq 0 ]
