// HIP build: the element types and SIMD helpers that the shared device code spells the CUDA way
// (type_ops.cuh, kernel.cu) and that ROCm 5.2 lacks: bfloat16 and fp8 under NVIDIA's names, the
// half min/max, and the byte-wise video instructions. __half itself comes from hip_fp16.h.
//
// Conversions round to nearest even; float to fp8 saturates to the largest finite value (what
// __NV_SATFINITE means), NaN stays NaN. bfloat16 arithmetic goes through float, which rounds
// correctly for one add or multiply of two bfloat16 values (float has more than 2 * 8 + 2 bits),
// and fma goes through double for the same reason.
// Usable from host code compiled by g++ (conversions only) and from HIP code (everything).
#pragma once

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__HIP__)
#define WEFT_HIP_HD __host__ __device__ inline
#define WEFT_HIP_D __device__ inline
#else
#define WEFT_HIP_HD inline
#endif

namespace weft::dev::hipcompat {

WEFT_HIP_HD uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
WEFT_HIP_HD float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

WEFT_HIP_HD uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1);  // round to nearest even on the 16 dropped bits
  return (uint16_t)(u >> 16);
}
WEFT_HIP_HD float bf16ToFloat(uint16_t b) { return bitsFloat((uint32_t)b << 16); }

// fp8 formats: e4m3 (bias 7, no infinities, S.1111.111 is NaN, largest 448) and e5m2 (bias 15,
// IEEE-like with infinities, largest 57344).
struct Fp8Format {
  int mantBits, bias;
  float maxFinite;
  uint8_t maxCode, nanCode;
};
WEFT_HIP_HD Fp8Format fp8Format(bool e4m3) {
  return e4m3 ? Fp8Format{3, 7, 448.0f, 0x7e, 0x7f} : Fp8Format{2, 15, 57344.0f, 0x7b, 0x7f};
}

WEFT_HIP_HD uint8_t floatToFp8(float f, bool e4m3) {
  const Fp8Format fmt = fp8Format(e4m3);
  const uint32_t u = floatBits(f);
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint8_t)(sign | fmt.nanCode);
  const float a = bitsFloat(u & 0x7fffffffu);
  if (a >= fmt.maxFinite) return (uint8_t)(sign | fmt.maxCode);  // saturate (also infinity)
  // Quantum of the binade of a (or of the subnormal range), then round to a multiple of it.
  const int minExp = 1 - fmt.bias;
  int e = (int)((u >> 23) & 0xff) - 127;
  if (e < minExp) e = minExp;
  const float quantum = ldexpf(1.0f, e - fmt.mantBits);
  const float q = rintf(a / quantum);  // exact division by a power of two; rint: nearest even
  if (q == 0.0f) return sign;
  float v = q * quantum;
  int ve = (int)((floatBits(v) >> 23) & 0xff) - 127;
  uint32_t code;
  if (ve < minExp) {
    code = (uint32_t)q;  // subnormal: exponent field 0
  } else {
    uint32_t mant = (uint32_t)(v / ldexpf(1.0f, ve - fmt.mantBits)) - (1u << fmt.mantBits);
    code = ((uint32_t)(ve + fmt.bias) << fmt.mantBits) | mant;
  }
  if (code > fmt.maxCode) code = fmt.maxCode;  // rounded up past the largest finite value
  return (uint8_t)(sign | code);
}

WEFT_HIP_HD float fp8ToFloat(uint8_t c, bool e4m3) {
  const Fp8Format fmt = fp8Format(e4m3);
  const int expBits = 7 - fmt.mantBits;
  const uint32_t ef = (c >> fmt.mantBits) & ((1u << expBits) - 1);
  const uint32_t m = c & ((1u << fmt.mantBits) - 1);
  float v;
  if (e4m3 && ef == 15 && m == 7) {
    v = NAN;
  } else if (!e4m3 && ef == 31) {
    v = m == 0 ? INFINITY : NAN;
  } else if (ef == 0) {
    v = ldexpf((float)m, 1 - fmt.bias - fmt.mantBits);
  } else {
    v = ldexpf((float)(m | (1u << fmt.mantBits)), (int)ef - fmt.bias - fmt.mantBits);
  }
  return (c & 0x80) ? -v : v;
}

}  // namespace weft::dev::hipcompat

// ---- bfloat16 ------------------------------------------------------------------------------

struct __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  WEFT_HIP_HD __nv_bfloat16(float f) : __x(weft::dev::hipcompat::floatToBf16(f)) {}
  WEFT_HIP_HD operator float() const { return weft::dev::hipcompat::bf16ToFloat(__x); }
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
WEFT_HIP_HD __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
WEFT_HIP_HD float __bfloat162float(__nv_bfloat16 b) { return (float)b; }

// ---- fp8 -----------------------------------------------------------------------------------

typedef uint8_t __nv_fp8_storage_t;
typedef uint16_t __nv_fp8x2_storage_t;
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };

struct __nv_fp8_e4m3 {
  __nv_fp8_storage_t __x;
  __nv_fp8_e4m3() = default;
  WEFT_HIP_HD explicit __nv_fp8_e4m3(float f) : __x(weft::dev::hipcompat::floatToFp8(f, true)) {}
  WEFT_HIP_HD explicit operator float() const { return weft::dev::hipcompat::fp8ToFloat(__x, true); }
};
struct __nv_fp8_e5m2 {
  __nv_fp8_storage_t __x;
  __nv_fp8_e5m2() = default;
  WEFT_HIP_HD explicit __nv_fp8_e5m2(float f) : __x(weft::dev::hipcompat::floatToFp8(f, false)) {}
  WEFT_HIP_HD explicit operator float() const { return weft::dev::hipcompat::fp8ToFloat(__x, false); }
};

WEFT_HIP_HD __nv_fp8_storage_t __nv_cvt_float_to_fp8(float f, __nv_saturation_t, __nv_fp8_interpretation_t k) {
  // Always saturating: the only mode weft uses.
  return weft::dev::hipcompat::floatToFp8(f, k == __NV_E4M3);
}

#if defined(__HIP__)

// fp8 values are exact in half precision, so these conversions never round.
WEFT_HIP_D __half __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t v, __nv_fp8_interpretation_t k) {
  return __float2half(weft::dev::hipcompat::fp8ToFloat(v, k == __NV_E4M3));
}
WEFT_HIP_D __half2 __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t v, __nv_fp8_interpretation_t k) {
  return __halves2half2(__nv_cvt_fp8_to_halfraw((uint8_t)(v & 0xff), k), __nv_cvt_fp8_to_halfraw((uint8_t)(v >> 8), k));
}
WEFT_HIP_D __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 f, __nv_saturation_t s, __nv_fp8_interpretation_t k) {
  return (__nv_fp8x2_storage_t)(__nv_cvt_float_to_fp8(f.x, s, k) | (__nv_cvt_float_to_fp8(f.y, s, k) << 8));
}

// ---- half min/max (not in ROCm 5.2's hip_fp16.h): through float, exact; NaN loses to a number,
// as fminf/fmaxf and CUDA's __hmin/__hmax do.
WEFT_HIP_D __half __hmin(__half a, __half b) { return __float2half(fminf(__half2float(a), __half2float(b))); }
WEFT_HIP_D __half __hmax(__half a, __half b) { return __float2half(fmaxf(__half2float(a), __half2float(b))); }
WEFT_HIP_D __half2 __hmin2(__half2 a, __half2 b) {
  return __halves2half2(__hmin(__low2half(a), __low2half(b)), __hmin(__high2half(a), __high2half(b)));
}
WEFT_HIP_D __half2 __hmax2(__half2 a, __half2 b) {
  return __halves2half2(__hmax(__low2half(a), __low2half(b)), __hmax(__high2half(a), __high2half(b)));
}

// ---- bfloat16 arithmetic -----------------------------------------------------------------------
WEFT_HIP_D __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a + (float)b); }
WEFT_HIP_D __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a * (float)b); }
WEFT_HIP_D __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(fminf((float)a, (float)b)); }
WEFT_HIP_D __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(fmaxf((float)a, (float)b)); }
WEFT_HIP_D __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16((float)((double)(float)a * (float)b + (float)c));
}
#define WEFT_BF16_PAIR(name)                                                              \
  WEFT_HIP_D __nv_bfloat162 name##2(__nv_bfloat162 a, __nv_bfloat162 b) {                 \
    return __nv_bfloat162{name(a.x, b.x), name(a.y, b.y)};                                \
  }
WEFT_BF16_PAIR(__hadd)
WEFT_BF16_PAIR(__hmul)
WEFT_BF16_PAIR(__hmin)
WEFT_BF16_PAIR(__hmax)
#undef WEFT_BF16_PAIR
WEFT_HIP_D __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return __nv_bfloat162{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}

// ---- byte-wise SIMD on 32-bit words (NVIDIA's video instructions; plain byte loops here) -----
namespace weft::dev::hipcompat {
template <typename F>
WEFT_HIP_D unsigned bytewise(unsigned a, unsigned b, F f) {
  unsigned r = 0;
#pragma unroll
  for (int i = 0; i < 4; i++) r |= (unsigned)(uint8_t)f((a >> (8 * i)) & 0xff, (b >> (8 * i)) & 0xff) << (8 * i);
  return r;
}
}  // namespace weft::dev::hipcompat
WEFT_HIP_D unsigned __vadd4(unsigned a, unsigned b) {
  // Lane-wise add without carries across bytes: add the low 7 bits, then fix the top bits.
  unsigned s = (a & 0x7f7f7f7fu) + (b & 0x7f7f7f7fu);
  return s ^ ((a ^ b) & 0x80808080u);
}
WEFT_HIP_D unsigned __vminu4(unsigned a, unsigned b) {
  return weft::dev::hipcompat::bytewise(a, b, [](unsigned x, unsigned y) { return x < y ? x : y; });
}
WEFT_HIP_D unsigned __vmaxu4(unsigned a, unsigned b) {
  return weft::dev::hipcompat::bytewise(a, b, [](unsigned x, unsigned y) { return x < y ? y : x; });
}
WEFT_HIP_D unsigned __vmins4(unsigned a, unsigned b) {
  return weft::dev::hipcompat::bytewise(a, b, [](unsigned x, unsigned y) { return (int8_t)x < (int8_t)y ? x : y; });
}
WEFT_HIP_D unsigned __vmaxs4(unsigned a, unsigned b) {
  return weft::dev::hipcompat::bytewise(a, b, [](unsigned x, unsigned y) { return (int8_t)x < (int8_t)y ? y : x; });
}

#endif  // __HIP__
