// A CPU stand-in for the arch layer, for host unit tests of the data path (reduce/): memory
// accesses become memcpy, SIMD intrinsics are emulated, threads are run one after the other by
// the test. Only what reduce/ needs exists here; synchronization (proto/) has no emulation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define WEFT_DEV inline
#define WEFT_DEV_NOINLINE __attribute__((noinline))
#define WEFT_UNROLL

namespace weft::dev::arch {

constexpr int kWarpSize = 32;

struct alignas(16) Pack16 {
  uint32_t w[4];
};

template <typename To, typename From>
inline To bitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bitCast needs equal sizes");
  To to;
  std::memcpy(static_cast<void*>(&to), &from, sizeof(To));
  return to;
}

inline Pack16 ld16(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16) std::abort();  // the GPU would fault
  Pack16 v;
  std::memcpy(&v, p, 16);
  return v;
}
inline void st16(void* p, const Pack16& v) {
  if (reinterpret_cast<uintptr_t>(p) % 16) std::abort();
  std::memcpy(p, &v, 16);
}
template <int Bytes>
inline uint64_t ldN(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % Bytes) std::abort();
  uint64_t v = 0;
  std::memcpy(&v, p, Bytes);
  return v;
}
template <int Bytes>
inline void stN(void* p, uint64_t v) {
  if (reinterpret_cast<uintptr_t>(p) % Bytes) std::abort();
  std::memcpy(p, &v, Bytes);
}
inline void trap() { std::abort(); }

}  // namespace weft::dev::arch

// Byte-wise SIMD of the CUDA video instructions.
namespace weft::dev::emu {
template <typename F>
inline unsigned bytewise(unsigned a, unsigned b, F f) {
  unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)(uint8_t)f((a >> (8 * i)) & 0xff, (b >> (8 * i)) & 0xff) << (8 * i);
  return r;
}
}  // namespace weft::dev::emu
inline unsigned __vadd4(unsigned a, unsigned b) { return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return x + y; }); }
inline unsigned __vminu4(unsigned a, unsigned b) { return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return x < y ? x : y; }); }
inline unsigned __vmaxu4(unsigned a, unsigned b) { return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return x < y ? y : x; }); }
inline unsigned __vmins4(unsigned a, unsigned b) {
  return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return (int8_t)x < (int8_t)y ? x : y; });
}
inline unsigned __vmaxs4(unsigned a, unsigned b) {
  return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return (int8_t)x < (int8_t)y ? y : x; });
}
// fma of half/bfloat16 is device-only in the CUDA headers; through double it rounds once.
inline __half __hfma(__half a, __half b, __half c) {
  return __double2half((double)__half2float(a) * __half2float(b) + __half2float(c));
}
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __halves2half2(__hfma(__low2half(a), __low2half(b), __low2half(c)), __hfma(__high2half(a), __high2half(b), __high2half(c)));
}
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __double2bfloat16((double)__bfloat162float(a) * __bfloat162float(b) + __bfloat162float(c));
}
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return __halves2bfloat162(__hfma(__low2bfloat16(a), __low2bfloat16(b), __low2bfloat16(c)),
                            __hfma(__high2bfloat16(a), __high2bfloat16(b), __high2bfloat16(c)));
}
