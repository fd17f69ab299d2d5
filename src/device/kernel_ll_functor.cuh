// LL kernels of one reduction functor each (special_kernels.h: kSpecialLLFunctorFirst...): the
// LL kernel's body with every call of that functor's Ring and Direct paths inlined. The general
// LL kernel runs these functors (all but the sums of float, half and bfloat16) through one
// non-inlined body per functor, whose saved registers and frame go through local memory that a
// latency-bound launch touches cold: int32 sum AllReduce took 6.3-6.6 us in a CUDA graph against
// 3.2-3.5 for float (two ranks on one H200, session 12). A launch whose items all have one such
// functor runs its kernel instead (planner.h: specialKernelOfLaunch). Tree/LL (which only
// NCCL_ALGO=Tree picks on one node) and the fp8 types stay on the general kernel: every kernel
// here costs device-compile time in each CI run.
//
// Included by kernel_ll_functor_a.cu and kernel_ll_functor_b.cu with WEFT_LL_FUNCTOR_PART 0 or 1:
// each builds the kernels of half of the operations, so that the device build compiles them in
// parallel. Not built for AMD (nothing is inlined there either: functors.cuh, kHotFn).
#pragma once

#include <cstdint>
#include <utility>

#include "device/kernel_dispatch.cuh"
#include "device/special_kernels.h"

#ifndef WEFT_LL_FUNCTOR_PART
#error "define WEFT_LL_FUNCTOR_PART (0 or 1) before including kernel_ll_functor.cuh"
#endif

namespace weft::dev {

#if !(defined(WEFT_GPU_HIP) || defined(__HIP__))

// Internal linkage: the two parts define these templates differently (inThisPart).
namespace functor_kernels {
namespace {

// The C++ element type of DataType Type.
template <int Type> struct ElemOf;
template <> struct ElemOf<kInt8> { using T = int8_t; };
template <> struct ElemOf<kUint8> { using T = uint8_t; };
template <> struct ElemOf<kInt32> { using T = int32_t; };
template <> struct ElemOf<kUint32> { using T = uint32_t; };
template <> struct ElemOf<kInt64> { using T = int64_t; };
template <> struct ElemOf<kUint64> { using T = uint64_t; };
template <> struct ElemOf<kFloat16> { using T = __half; };
template <> struct ElemOf<kFloat32> { using T = float; };
template <> struct ElemOf<kFloat64> { using T = double; };
template <> struct ElemOf<kBfloat16> { using T = __nv_bfloat16; };

// The functor of reduction Op on T.
template <int Op, typename T> struct FnOf;
template <typename T> struct FnOf<kRedSum, T> { using Fn = FnSum<T>; };
template <typename T> struct FnOf<kRedProd, T> { using Fn = FnProd<T>; };
template <typename T> struct FnOf<kRedMax, T> { using Fn = FnMax<T>; };
template <typename T> struct FnOf<kRedMin, T> { using Fn = FnMin<T>; };
template <typename T> struct FnOf<kRedPreMulSum, T> { using Fn = FnPreMulSum<T>; };
template <typename T> struct FnOf<kRedSumPostDiv, T> { using Fn = FnSumPostDiv<T>; };

template <int Kind>
using FunctorOfKind = typename FnOf<llFunctorKindOp(Kind), typename ElemOf<llFunctorKindType(Kind)>::T>::Fn;

// The host's list of functors the general LL kernel inlines (llInlinedFunctor: those get no
// functor kernel) must be the device's (kHotFn): a functor in neither would lose its ~3 us again.
template <int Op, int Type>
constexpr bool hotListsAgreeAt() {
  if constexpr (Type == kFloat8e4m3 || Type == kFloat8e5m2 || (Op == kRedSumPostDiv && !isIntegerType(Type)))
    return true;  // no functor kernel exists for these
  else
    return kHotFn<typename FnOf<Op, typename ElemOf<Type>::T>::Fn> == llInlinedFunctor(Op, Type);
}
template <int... I>
constexpr bool hotListsAgree(std::integer_sequence<int, I...>) {
  return (hotListsAgreeAt<I / kNumDataTypes, I % kNumDataTypes>() && ...);
}
static_assert(hotListsAgree(std::make_integer_sequence<int, kNumRedOps * kNumDataTypes>{}),
              "special_kernels.h llInlinedFunctor and functors.cuh kHotFn list different functors");

// Part 0: sum, product, PreMulSum; part 1: max, min, SumPostDiv (18 and 26 kernels).
constexpr bool inThisPart(int op) {
  const bool partZero = op == kRedSum || op == kRedProd || op == kRedPreMulSum;
  return WEFT_LL_FUNCTOR_PART == 0 ? partZero : !partZero;
}

// Force-inlined, as dispatch::WorkRunner (an out-of-line runner would put its frame on the stack).
template <int Kind>
struct Runner {
  WEFT_DEV void operator()(const DevWork* w, const WorkEnvT<FlagShared>& env) const {
    if (!fitsLLFunctorKind(*w, Kind)) arch::trap();  // the host mixed up a launch: do not misread an item
    using Fn = FunctorOfKind<Kind>;
    if (w->algo == kAlgoDirect) runDirectAllReduce<Fn>(*w, env);
    else runRingColl<Fn, LLProto>(*w, env);
  }
};

template <int Kind>
__global__ void __launch_bounds__(kLLThreads, 1) weftKernelLLFunctor(const WEFT_GRID_CONSTANT DevKernelArgs args) {
  __shared__ FlagKernelSmem smem;
  kernelBody<kLLThreads>(args, (int)blockIdx.x, smem, Runner<Kind>{});
}

template <int Kind>
const void* entryOf() {
  if constexpr (llFunctorKindBuilt(Kind) && inThisPart(llFunctorKindOp(Kind)))
    return reinterpret_cast<const void*>(&weftKernelLLFunctor<Kind>);
  else
    return nullptr;
}

template <int... I>
const void* lookup(int kind, std::integer_sequence<int, I...>) {
  static const void* const table[] = {entryOf<kSpecialLLFunctorFirst + I>()...};
  return table[kind - kSpecialLLFunctorFirst];
}

}  // namespace
}  // namespace functor_kernels

#endif

// The kernel of functor kind `kind` if this part builds it, else null.
const void* WEFT_LL_FUNCTOR_ENTRY(int kind) {
#if !(defined(WEFT_GPU_HIP) || defined(__HIP__))
  if (kind < kSpecialLLFunctorFirst || kind >= kNumSpecialKinds) return nullptr;
  return functor_kernels::lookup(kind, std::make_integer_sequence<int, kNumSpecialKinds - kSpecialLLFunctorFirst>{});
#else
  (void)kind;
  return nullptr;
#endif
}

}  // namespace weft::dev
