# Sourced by tools/test.sh and tools/bench.sh: installs what the build needs on Debian 12 (when run as
# root and something is missing) and puts the CUDA toolkit on PATH. With WEFT_SETUP_HIP=1 (tools/test.sh
# sets it) it also installs Debian's ROCm 5.2 HIP compiler for the HIP build (hipcc pulls in clang-15,
# lld-15, the device libraries and libamdhip64). Unless WEFT_FUZZ_SECONDS=0, clang with libFuzzer too.
weft_packages=(cmake ninja-build g++ libgtest-dev python3 binutils)
# tools/fuzz.sh (run by tools/test.sh): clang and its libFuzzer/sanitizer runtime.
if [ "${WEFT_FUZZ_SECONDS:-10}" != 0 ]; then weft_packages+=(clang libclang-rt-14-dev); fi
if [ "${WEFT_SETUP_HIP:-0}" = 1 ]; then weft_packages+=(hipcc); fi
weft_missing=()
for p in "${weft_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || weft_missing+=("$p")
done
if [ "${#weft_missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "weft setup: installing ${weft_missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${weft_missing[@]}"
  else
    echo "weft setup: missing packages ${weft_missing[*]}; install them (apt-get install ${weft_missing[*]})" >&2
  fi
fi
for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
  [ -x "$d/nvcc" ] && case ":$PATH:" in *":$d:"*) ;; *) export PATH="$d:$PATH" ;; esac
done
if ! command -v nvcc >/dev/null; then
  echo "weft setup: the CUDA toolkit (nvcc) was not found; install CUDA 12.x/13.x under /usr/local/cuda" >&2
  return 1 2>/dev/null || exit 1
fi
