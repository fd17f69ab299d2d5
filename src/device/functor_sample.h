// Which reduction functors the device build compiles into its kernels. Normally all of them. A
// compile-check build (CMake -DWEFT_DEVICE_FUNCTOR_SAMPLE=ON: CI's HIP build, which no GPU runs)
// puts only a sample into the kernels: one functor per element size and per functor shape (plain,
// pre-multiplied, post-divided, signed compare). Each functor instantiates the whole Ring/Tree/
// Direct data path once per protocol, about 19 s of clang per functor and protocol for one AMD
// target: with all 57 the HIP build was over half of CI's time. The data path depends on the
// functor only through its element size and these shapes, so the sample compiles every path;
// every functor's own element and pack operations still compile, in functor_check.cu. A library
// built so refuses the other reductions (isSupported), with the build named in its error.
#pragma once

#include "device/special_kernels.h"

namespace weft::dev {

#if defined(WEFT_DEVICE_FUNCTOR_SAMPLE)
constexpr bool kDeviceFunctorSample = true;
#else
constexpr bool kDeviceFunctorSample = false;
#endif

// Whether the functor of (op, type) is in the sample, type after the signed-to-unsigned folding
// of redOpFoldsSigned operations (the device dispatch folds the same way: functor_visit.cuh).
WEFT_HD constexpr bool functorInSample(int op, int type) {
  if (redOpFoldsSigned(op)) type = unsignedTwin(type);
  switch (op) {
    case kRedSum:  // 1, 2, 4 and 8 bytes; fp8's conversions
      return type == kUint8 || type == kFloat16 || type == kFloat32 || type == kFloat64 || type == kFloat8e4m3;
    case kRedPreMulSum: return type == kFloat32;  // preOp, the scalar (on the device too)
    case kRedSumPostDiv: return type == kUint32;  // postOp
    case kRedMax: return type == kInt8;           // a signed compare
    default: return false;
  }
}

// Whether this build's kernels carry the functor of (op, type).
WEFT_HD constexpr bool functorInKernels(int op, int type) { return !kDeviceFunctorSample || functorInSample(op, type); }

}  // namespace weft::dev
