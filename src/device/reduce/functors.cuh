// Reduction functors: one type per (operation, element type). What reduce_copy.cuh relies on:
//   using Elem;                        the element type
//   kPreOp:  preOp() must be applied to the rank's own input when it is first loaded
//   kPostOp: postOp() must be applied to the fully reduced value before it is stored
//   reduce(a, b)        on elements and on 16-byte packs
//   reducePre(acc, own) = reduce(acc, preOp(own)), fused where that rounds once (PreMulSum: fma)
//   preOp(x), postOp(x) on elements and packs (identity unless the flags say otherwise)
//   static fromWork(work): the functor for a work item (reads PreMulSum/SumPostDiv arguments)
#pragma once

#include "device/abi.h"
#include "device/reduce/type_ops.cuh"

namespace weft::dev {

template <typename T>
WEFT_DEV T elemFromBits(uint64_t bits) {
  T v;
  memcpy(static_cast<void*>(&v), &bits, sizeof(T));  // little-endian: the low bytes hold the value
  return v;
}

template <typename T>
struct FnBase {
  using Elem = T;
  using Ops = TypeOps<T>;
  static constexpr bool kPreOp = false;
  static constexpr bool kPostOp = false;
  WEFT_DEV T preOp(T x) const { return x; }
  WEFT_DEV Pack16 preOp(const Pack16& x) const { return x; }
  WEFT_DEV T postOp(T x) const { return x; }
  WEFT_DEV Pack16 postOp(const Pack16& x) const { return x; }
};

// Copy-only collectives: never reduces (the data path checks kIsCopy before calling reduce).
struct FnCopy : FnBase<uint8_t> {
  static constexpr bool kIsCopy = true;
  WEFT_DEV uint8_t reduce(uint8_t a, uint8_t) const { return a; }
  WEFT_DEV Pack16 reduce(const Pack16& a, const Pack16&) const { return a; }
  WEFT_DEV uint8_t reducePre(uint8_t a, uint8_t) const { return a; }
  WEFT_DEV Pack16 reducePre(const Pack16& a, const Pack16&) const { return a; }
  static WEFT_DEV FnCopy fromWork(const DevWork&) { return FnCopy{}; }
};

#define WEFT_SIMPLE_FN(Name, OpName)                                                             \
  template <typename T>                                                                          \
  struct Name : FnBase<T> {                                                                      \
    using Ops = TypeOps<T>;                                                                      \
    static constexpr bool kIsCopy = false;                                                       \
    WEFT_DEV T reduce(T a, T b) const { return Ops::OpName(a, b); }                              \
    WEFT_DEV Pack16 reduce(const Pack16& a, const Pack16& b) const { return Ops::OpName(a, b); } \
    WEFT_DEV T reducePre(T a, T own) const { return Ops::OpName(a, own); }                       \
    WEFT_DEV Pack16 reducePre(const Pack16& a, const Pack16& own) const { return Ops::OpName(a, own); } \
    static WEFT_DEV Name fromWork(const DevWork&) { return Name{}; }                             \
  };

WEFT_SIMPLE_FN(FnSum, add)
WEFT_SIMPLE_FN(FnProd, mul)
WEFT_SIMPLE_FN(FnMin, min)
WEFT_SIMPLE_FN(FnMax, max)
#undef WEFT_SIMPLE_FN

// Sum of each rank's input multiplied by a scalar (ncclRedOpCreatePreMulSum; Avg on floats).
template <typename T>
struct FnPreMulSum : FnBase<T> {
  using Ops = TypeOps<T>;
  static constexpr bool kIsCopy = false;
  static constexpr bool kPreOp = true;
  T scalar;
  WEFT_DEV T reduce(T a, T b) const { return Ops::add(a, b); }
  WEFT_DEV Pack16 reduce(const Pack16& a, const Pack16& b) const { return Ops::add(a, b); }
  WEFT_DEV T preOp(T x) const { return Ops::mul(x, scalar); }
  WEFT_DEV Pack16 preOp(const Pack16& x) const { return packMap<T>(x, [this](T v) { return Ops::mul(v, scalar); }); }
  WEFT_DEV T reducePre(T a, T own) const { return Ops::fma(own, scalar, a); }
  WEFT_DEV Pack16 reducePre(const Pack16& a, const Pack16& own) const { return Ops::fma(own, scalar, a); }
  static WEFT_DEV FnPreMulSum fromWork(const DevWork& w) {
    uint64_t bits = w.redOpArg;
    if (w.flags & kWorkFlagScalarOnDevice) bits = arch::ldN<sizeof(T)>(reinterpret_cast<const void*>(w.redOpArg));
    FnPreMulSum f;
    f.scalar = elemFromBits<T>(bits);
    return f;
  }
};

// Integer average: sum, then divide the final value by redOpArg (nRanks for ncclAvg).
template <typename T>
struct FnSumPostDiv : FnBase<T> {
  using Ops = TypeOps<T>;
  static constexpr bool kIsCopy = false;
  static constexpr bool kPostOp = true;
  uint64_t divisor;
  WEFT_DEV T reduce(T a, T b) const { return Ops::add(a, b); }
  WEFT_DEV Pack16 reduce(const Pack16& a, const Pack16& b) const { return Ops::add(a, b); }
  WEFT_DEV T reducePre(T a, T own) const { return Ops::add(a, own); }
  WEFT_DEV Pack16 reducePre(const Pack16& a, const Pack16& own) const { return Ops::add(a, own); }
  WEFT_DEV T postOp(T x) const { return Ops::div(x, divisor); }
  WEFT_DEV Pack16 postOp(const Pack16& x) const { return packMap<T>(x, [this](T v) { return Ops::div(v, divisor); }); }
  static WEFT_DEV FnSumPostDiv fromWork(const DevWork& w) {
    FnSumPostDiv f;
    f.divisor = w.redOpArg == 0 ? 1 : w.redOpArg;
    return f;
  }
};

// Hot functors: the data path inlines every call of these into the LL kernels (the general Simple
// kernel runs every item out of line: SimpleProtoT::kInlineHotWork). A non-inlined device
// function call costs a few thousand cycles on H200 here (its arguments and saved registers go
// through local memory, which misses the cache at the start of every launch: measured with clock64
// stamps, session 3), which is most of a small collective's time. The others keep one
// non-inlined body per functor, so that the kernels stay small and quick to build.
// On AMD (never run on hardware yet) nothing is hot: with them inlined, clang's device build of
// kernel.cu for one target ran past 25 minutes in CI (about 9 before), which every CI run pays.
template <typename Fn>
constexpr bool kHotFn = false;
#if !(defined(WEFT_GPU_HIP) || defined(__HIP__))
template <>
constexpr bool kHotFn<FnCopy> = true;
template <>
constexpr bool kHotFn<FnSum<float>> = true;
template <>
constexpr bool kHotFn<FnSum<__half>> = true;
template <>
constexpr bool kHotFn<FnSum<__nv_bfloat16>> = true;
#endif

}  // namespace weft::dev
