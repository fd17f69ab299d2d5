// Entries of the specialized Simple kernels (special_kernels.h): the Simple kernel's body with
// one kind of item (Ring sums of float/half/bfloat16, Ring copies, SendRecv, the symmetric sums
// and AllGather), every call inlined but, for the Ring sums, each slice's data movement
// (specialKernelOutlinesCopies); their inlined twins for small items inline that too.
#include "device/coll/run_special.cuh"
#include "device/kernel_body.cuh"
#include "device/kernel_entries.h"

namespace weft::dev {

template <int Kind>
__global__ void __launch_bounds__(kSimpleThreads, 1) weftKernelSpecialSimple(const WEFT_GRID_CONSTANT DevKernelArgs args) {
  __shared__ SimpleKernelSmem smem;
  kernelBody<kSimpleThreads>(args, (int)blockIdx.x, smem,
                             [](const DevWork* w, const WorkEnv& env) { runSpecialWork<Kind>(w, env); });
}

const void* specialSimpleKernelEntry(int kind) {
  switch (kind) {
    case kSpecialRingSumF32: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialRingSumF32>);
    case kSpecialRingSumF16: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialRingSumF16>);
    case kSpecialRingSumBf16: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialRingSumBf16>);
    case kSpecialRingCopy: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialRingCopy>);
    case kSpecialSendRecv: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialSendRecv>);
    case kSpecialRingSumInlineF32: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialRingSumInlineF32>);
    case kSpecialRingSumInlineF16: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialRingSumInlineF16>);
    case kSpecialRingSumInlineBf16:
      return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialRingSumInlineBf16>);
    case kSpecialSymSumF32: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialSymSumF32>);
    case kSpecialSymSumF16: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialSymSumF16>);
    case kSpecialSymSumBf16: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialSymSumBf16>);
    case kSpecialSymGather: return reinterpret_cast<const void*>(&weftKernelSpecialSimple<kSpecialSymGather>);
    default: return nullptr;
  }
}

}  // namespace weft::dev
