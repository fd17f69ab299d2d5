#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers that read outside bytes and the live network proxy (tests/fuzz):
#   bash tools/fuzz.sh [main-build-dir (build)] [seconds per target (20)]
# Builds the targets with clang (libFuzzer + ASan + UBSan) in <main-build-dir>-fuzz and runs each;
# a crash, sanitizer report, leak, timeout (10 s per input) or memory above 2 GiB fails it, and the
# input that did it is left in <main-build-dir>-fuzz/crashes/. Corpora persist between runs there.
# Needs the main build (for its generated nccl.h) and clang with libFuzzer; says so when missing.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
main="$(cd "${1:-$here/build}" && pwd)"
seconds="${2:-20}"
out="$main-fuzz"
cxx=""
for c in clang++ clang++-15 clang++-14; do
  if command -v "$c" > /dev/null && echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
      "$c" -x c++ -fsanitize=fuzzer - -o /tmp/weft-fuzz-probe.$$ 2> /dev/null; then cxx=$c; break; fi
done
rm -f /tmp/weft-fuzz-probe.$$
if [ -z "$cxx" ]; then
  echo "weft fuzz: SKIPPED: no clang++ with libFuzzer here (apt-get install clang)" >&2
  exit 0
fi
mkdir -p "$out"
cmake -S "$here/tests/fuzz" -B "$out" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DWEFT_GEN_INCLUDE="$main/include" > "$out/configure.log" 2>&1 ||
  { cat "$out/configure.log"; exit 1; }
cmake --build "$out" -j"$(nproc)" > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
mkdir -p "$out/crashes" "$out/logs"
failed=0
for t in "$out"/fuzz_*; do
  [ -f "$t" ] && [ -x "$t" ] || continue
  name=$(basename "$t")
  log="$out/logs/$name.log"
  mkdir -p "$out/corpus/$name"
  if "$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$out/crashes/$name-" "$out/corpus/$name" > "$log" 2>&1; then
    echo "weft fuzz: $name: $(grep -E '^Done [0-9]+ runs' "$log" | tail -1) PASS"
  else
    echo "weft fuzz: $name: FAIL (log $log)"; grep -E "ERROR|invariant|SUMMARY|runtime error" "$log" | head -8
    failed=1
  fi
done
exit $failed
