// From a work item's (reduction, element type) to its functor type: v.template run<Op, Type,
// Fn>() is called with the functor Fn of reduction Op on DataType Type. Signed integers fold onto
// their unsigned twins where the bits agree (sum, product, PreMulSum: redOpFoldsSigned), so each
// bit-identical pair is instantiated once; SumPostDiv exists for integers only. A pair that does
// not exist traps: the host lets none through (kernel.cu: isSupported).
#pragma once

#include <cstdint>

#include "device/reduce/functors.cuh"
#include "device/special_kernels.h"

namespace weft::dev {

template <int Op, template <typename> class Fn, typename V>
WEFT_DEV void visitFunctorOfType(int type, const V& v) {
  constexpr bool kFold = redOpFoldsSigned(Op);
  switch (type) {
    case kInt8:
      if constexpr (kFold) v.template run<Op, kUint8, Fn<uint8_t>>();
      else v.template run<Op, kInt8, Fn<int8_t>>();
      return;
    case kUint8: v.template run<Op, kUint8, Fn<uint8_t>>(); return;
    case kInt32:
      if constexpr (kFold) v.template run<Op, kUint32, Fn<uint32_t>>();
      else v.template run<Op, kInt32, Fn<int32_t>>();
      return;
    case kUint32: v.template run<Op, kUint32, Fn<uint32_t>>(); return;
    case kInt64:
      if constexpr (kFold) v.template run<Op, kUint64, Fn<uint64_t>>();
      else v.template run<Op, kInt64, Fn<int64_t>>();
      return;
    case kUint64: v.template run<Op, kUint64, Fn<uint64_t>>(); return;
    default: break;
  }
  if constexpr (Op != kRedSumPostDiv) {
    switch (type) {
      case kFloat16: v.template run<Op, kFloat16, Fn<__half>>(); return;
      case kFloat32: v.template run<Op, kFloat32, Fn<float>>(); return;
      case kFloat64: v.template run<Op, kFloat64, Fn<double>>(); return;
      case kBfloat16: v.template run<Op, kBfloat16, Fn<__nv_bfloat16>>(); return;
      case kFloat8e4m3: v.template run<Op, kFloat8e4m3, Fn<__nv_fp8_e4m3>>(); return;
      case kFloat8e5m2: v.template run<Op, kFloat8e5m2, Fn<__nv_fp8_e5m2>>(); return;
      default: break;
    }
  }
  arch::trap();
}

template <typename V>
WEFT_DEV void visitFunctor(int op, int type, const V& v) {
  switch (op) {
    case kRedSum: visitFunctorOfType<kRedSum, FnSum>(type, v); return;
    case kRedProd: visitFunctorOfType<kRedProd, FnProd>(type, v); return;
    case kRedMax: visitFunctorOfType<kRedMax, FnMax>(type, v); return;
    case kRedMin: visitFunctorOfType<kRedMin, FnMin>(type, v); return;
    case kRedPreMulSum: visitFunctorOfType<kRedPreMulSum, FnPreMulSum>(type, v); return;
    case kRedSumPostDiv: visitFunctorOfType<kRedSumPostDiv, FnSumPostDiv>(type, v); return;
    default: arch::trap();
  }
}

}  // namespace weft::dev
