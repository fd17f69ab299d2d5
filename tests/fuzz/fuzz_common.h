// What the fuzz targets share. Each target is a function `void name(const uint8_t*, size_t)` in
// weft::fuzz; fuzz_main.cc makes one libFuzzer executable per target (WEFT_FUZZ_TARGET names it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::fuzz {

// A broken promise of the code under test: abort, so that libFuzzer keeps the input.
inline void require(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz invariant broken: %s\n", what);
    abort();
  }
}

// Reads the input front to back, as zeros once it runs out, so that every input means something.
struct Cursor {
  const uint8_t* at;
  size_t left;
  template <typename T>
  T take() {
    T value{};
    const size_t n = std::min(left, sizeof(T));
    memcpy(&value, at, n);
    at += n;
    left -= n;
    return value;
  }
  // The rest of the input as a struct: raw bytes, or XORed onto `base` (a valid one) so that
  // zeros keep it valid and the checks past the magic get explored.
  template <typename T>
  T over(const T& base, bool xorOnto) {
    T value = base;
    if (!xorOnto) memset(&value, 0, sizeof(value));
    char* bytes = reinterpret_cast<char*>(&value);
    for (size_t i = 0; i < sizeof(T) && i < left; ++i) bytes[i] = xorOnto ? bytes[i] ^ (char)at[i] : (char)at[i];
    return value;
  }
};

// fuzz_targets.cc: parsers of outside bytes and text.
void frames(const uint8_t* data, size_t size);
void uniqueId(const uint8_t* data, size_t size);
void address(const uint8_t* data, size_t size);
void rankRecord(const uint8_t* data, size_t size);
void transportRow(const uint8_t* data, size_t size);
void topologyXml(const uint8_t* data, size_t size);
void ledgerPage(const uint8_t* data, size_t size);
void settings(const uint8_t* data, size_t size);
void netWire(const uint8_t* data, size_t size);
// fuzz_net_proxy.cc: a live network proxy fed Simple steps or credits by a peer over loopback.
void netProxyStream(const uint8_t* data, size_t size);
// fuzz_net_lines.cc: the same for a connection with LL: lines frames mixed with Simple steps.
void netProxyLines(const uint8_t* data, size_t size);

}  // namespace weft::fuzz
