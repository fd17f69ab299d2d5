// Arithmetic per element type, on single elements and on 16-byte packs. Packs use the hardware's
// paired/SIMD instructions where they exist (half2, bfloat162, byte-wise video instructions);
// fp8 goes through float (exact for one add or multiply of two fp8 values, then one rounding).
// Integer add and multiply are done on unsigned types: wrap-around, never undefined behaviour.
#pragma once

#include <cstdint>
#include <type_traits>

#include "device/arch/arch.cuh"

namespace weft::dev {

using arch::Pack16;

template <typename T>
WEFT_DEV T packGet(const Pack16& p, int i) {
  T v;
  memcpy(&v, reinterpret_cast<const char*>(&p) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
WEFT_DEV void packSet(Pack16& p, int i, T v) {
  memcpy(reinterpret_cast<char*>(&p) + i * sizeof(T), &v, sizeof(T));
}

template <typename T, typename F>
WEFT_DEV Pack16 packMap(const Pack16& a, F f) {
  Pack16 r;
WEFT_UNROLL
  for (int i = 0; i < (int)(16 / sizeof(T)); i++) packSet<T>(r, i, f(packGet<T>(a, i)));
  return r;
}

template <typename T, typename F>
WEFT_DEV Pack16 packMap2(const Pack16& a, const Pack16& b, F f) {
  Pack16 r;
WEFT_UNROLL
  for (int i = 0; i < (int)(16 / sizeof(T)); i++)
    packSet<T>(r, i, f(packGet<T>(a, i), packGet<T>(b, i)));
  return r;
}

// Applies f to each 32-bit word of two packs (for types with 2- or 4-way SIMD per word).
template <typename F>
WEFT_DEV Pack16 wordMap2(const Pack16& a, const Pack16& b, F f) {
  Pack16 r;
WEFT_UNROLL
  for (int i = 0; i < 4; i++) r.w[i] = f(a.w[i], b.w[i]);
  return r;
}

// ---- integers ----------------------------------------------------------------------------

template <typename T>
struct IntOps {
  static_assert(std::is_integral<T>::value, "IntOps is for integer types");
  using U = std::make_unsigned_t<T>;
  static WEFT_DEV T add(T a, T b) { return (T)(U)((U)a + (U)b); }
  static WEFT_DEV T mul(T a, T b) { return (T)(U)((U)a * (U)b); }
  static WEFT_DEV T min(T a, T b) { return a < b ? a : b; }
  static WEFT_DEV T max(T a, T b) { return a < b ? b : a; }
  static WEFT_DEV T fma(T x, T s, T acc) { return add(mul(x, s), acc); }
  static WEFT_DEV T div(T a, uint64_t d) {
    // int8/uint8 promote to int; the quotient of a T by d >= 1 always fits T again.
    if constexpr (std::is_signed<T>::value) return (T)((int64_t)a / (int64_t)d);
    else return (T)((uint64_t)a / d);
  }
  static WEFT_DEV Pack16 add(const Pack16& a, const Pack16& b) {
    if constexpr (sizeof(T) == 1) return wordMap2(a, b, [](uint32_t x, uint32_t y) { return __vadd4(x, y); });
    else return packMap2<T>(a, b, [](T x, T y) { return add(x, y); });
  }
  static WEFT_DEV Pack16 mul(const Pack16& a, const Pack16& b) {
    return packMap2<T>(a, b, [](T x, T y) { return mul(x, y); });
  }
  static WEFT_DEV Pack16 min(const Pack16& a, const Pack16& b) {
    if constexpr (sizeof(T) == 1 && std::is_signed<T>::value)
      return wordMap2(a, b, [](uint32_t x, uint32_t y) { return __vmins4(x, y); });
    else if constexpr (sizeof(T) == 1)
      return wordMap2(a, b, [](uint32_t x, uint32_t y) { return __vminu4(x, y); });
    else return packMap2<T>(a, b, [](T x, T y) { return min(x, y); });
  }
  static WEFT_DEV Pack16 max(const Pack16& a, const Pack16& b) {
    if constexpr (sizeof(T) == 1 && std::is_signed<T>::value)
      return wordMap2(a, b, [](uint32_t x, uint32_t y) { return __vmaxs4(x, y); });
    else if constexpr (sizeof(T) == 1)
      return wordMap2(a, b, [](uint32_t x, uint32_t y) { return __vmaxu4(x, y); });
    else return packMap2<T>(a, b, [](T x, T y) { return max(x, y); });
  }
  static WEFT_DEV Pack16 fma(const Pack16& x, T s, const Pack16& acc) {
    return packMap2<T>(x, acc, [s](T a, T c) { return fma(a, s, c); });
  }
};

// ---- float / double ------------------------------------------------------------------------

template <typename T>
struct FloatOps {
  static WEFT_DEV T add(T a, T b) { return a + b; }
  static WEFT_DEV T mul(T a, T b) { return a * b; }
  static WEFT_DEV T min(T a, T b) {
    if constexpr (sizeof(T) == 4) return fminf(a, b);
    else return fmin(a, b);
  }
  static WEFT_DEV T max(T a, T b) {
    if constexpr (sizeof(T) == 4) return fmaxf(a, b);
    else return fmax(a, b);
  }
  static WEFT_DEV T fma(T x, T s, T acc) {
    if constexpr (sizeof(T) == 4) return fmaf(x, s, acc);
    else return ::fma(x, s, acc);
  }
  static WEFT_DEV Pack16 add(const Pack16& a, const Pack16& b) { return packMap2<T>(a, b, [](T x, T y) { return x + y; }); }
  static WEFT_DEV Pack16 mul(const Pack16& a, const Pack16& b) { return packMap2<T>(a, b, [](T x, T y) { return x * y; }); }
  static WEFT_DEV Pack16 min(const Pack16& a, const Pack16& b) { return packMap2<T>(a, b, [](T x, T y) { return min(x, y); }); }
  static WEFT_DEV Pack16 max(const Pack16& a, const Pack16& b) { return packMap2<T>(a, b, [](T x, T y) { return max(x, y); }); }
  static WEFT_DEV Pack16 fma(const Pack16& x, T s, const Pack16& acc) {
    return packMap2<T>(x, acc, [s](T a, T c) { return fma(a, s, c); });
  }
};

// ---- half and bfloat16: paired instructions, correctly rounded ------------------------------

template <typename T, typename T2>
struct Half2Ops {
  static WEFT_DEV T2 pair(uint32_t w) { return arch::bitCast<T2>(w); }
  static WEFT_DEV uint32_t word(T2 v) { return arch::bitCast<uint32_t>(v); }
  static WEFT_DEV T add(T a, T b) { return __hadd(a, b); }
  static WEFT_DEV T mul(T a, T b) { return __hmul(a, b); }
  static WEFT_DEV T min(T a, T b) { return __hmin(a, b); }
  static WEFT_DEV T max(T a, T b) { return __hmax(a, b); }
  static WEFT_DEV T fma(T x, T s, T acc) { return __hfma(x, s, acc); }
  static WEFT_DEV Pack16 add(const Pack16& a, const Pack16& b) {
    return wordMap2(a, b, [](uint32_t x, uint32_t y) { return word(__hadd2(pair(x), pair(y))); });
  }
  static WEFT_DEV Pack16 mul(const Pack16& a, const Pack16& b) {
    return wordMap2(a, b, [](uint32_t x, uint32_t y) { return word(__hmul2(pair(x), pair(y))); });
  }
  static WEFT_DEV Pack16 min(const Pack16& a, const Pack16& b) {
    return wordMap2(a, b, [](uint32_t x, uint32_t y) { return word(__hmin2(pair(x), pair(y))); });
  }
  static WEFT_DEV Pack16 max(const Pack16& a, const Pack16& b) {
    return wordMap2(a, b, [](uint32_t x, uint32_t y) { return word(__hmax2(pair(x), pair(y))); });
  }
  static WEFT_DEV Pack16 fma(const Pack16& x, T s, const Pack16& acc) {
    T2 s2{s, s};
    return wordMap2(x, acc, [s2](uint32_t a, uint32_t c) { return word(__hfma2(pair(a), s2, pair(c))); });
  }
};

// ---- fp8: through float, rounding once, saturating to the largest finite value --------------

template <typename T, __nv_fp8_interpretation_t Kind>
struct Fp8Ops {
  static WEFT_DEV float toFloat(T v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v.__x, Kind))); }
  static WEFT_DEV T fromFloat(float f) {
    T r;
    r.__x = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, Kind);
    return r;
  }
  static WEFT_DEV float2 toFloat2(uint16_t bits) {
    return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(bits, Kind)));
  }
  static WEFT_DEV uint16_t fromFloat2(float2 f) { return __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, Kind); }
  template <typename F>
  static WEFT_DEV Pack16 pairMap2(const Pack16& a, const Pack16& b, F f) {
    Pack16 r;
WEFT_UNROLL
    for (int i = 0; i < 8; i++) {
      float2 x = toFloat2(packGet<uint16_t>(a, i)), y = toFloat2(packGet<uint16_t>(b, i));
      packSet<uint16_t>(r, i, fromFloat2(make_float2(f(x.x, y.x), f(x.y, y.y))));
    }
    return r;
  }
  static WEFT_DEV T add(T a, T b) { return fromFloat(toFloat(a) + toFloat(b)); }
  static WEFT_DEV T mul(T a, T b) { return fromFloat(toFloat(a) * toFloat(b)); }
  static WEFT_DEV T min(T a, T b) { return fromFloat(fminf(toFloat(a), toFloat(b))); }
  static WEFT_DEV T max(T a, T b) { return fromFloat(fmaxf(toFloat(a), toFloat(b))); }
  static WEFT_DEV T fma(T x, T s, T acc) { return fromFloat(fmaf(toFloat(x), toFloat(s), toFloat(acc))); }
  static WEFT_DEV Pack16 add(const Pack16& a, const Pack16& b) { return pairMap2(a, b, [](float x, float y) { return x + y; }); }
  static WEFT_DEV Pack16 mul(const Pack16& a, const Pack16& b) { return pairMap2(a, b, [](float x, float y) { return x * y; }); }
  static WEFT_DEV Pack16 min(const Pack16& a, const Pack16& b) { return pairMap2(a, b, [](float x, float y) { return fminf(x, y); }); }
  static WEFT_DEV Pack16 max(const Pack16& a, const Pack16& b) { return pairMap2(a, b, [](float x, float y) { return fmaxf(x, y); }); }
  static WEFT_DEV Pack16 fma(const Pack16& x, T s, const Pack16& acc) {
    float sf = toFloat(s);
    return pairMap2(x, acc, [sf](float a, float c) { return fmaf(a, sf, c); });
  }
};

// TypeOps<T>: the table above selected by element type.
template <typename T, typename Enable = void>
struct TypeOps;
template <typename T>
struct TypeOps<T, std::enable_if_t<std::is_integral<T>::value>> : IntOps<T> {};
template <>
struct TypeOps<float> : FloatOps<float> {};
template <>
struct TypeOps<double> : FloatOps<double> {};
template <>
struct TypeOps<__half> : Half2Ops<__half, __half2> {};
template <>
struct TypeOps<__nv_bfloat16> : Half2Ops<__nv_bfloat16, __nv_bfloat162> {};
template <>
struct TypeOps<__nv_fp8_e4m3> : Fp8Ops<__nv_fp8_e4m3, __NV_E4M3> {};
template <>
struct TypeOps<__nv_fp8_e5m2> : Fp8Ops<__nv_fp8_e5m2, __NV_E5M2> {};

}  // namespace weft::dev
