// Entries of the specialized LL kernels (special_kernels.h): the LL kernel's body with one kind
// of item, every call inlined. Their own translation unit, compiled beside the protocols'
// kernels; the Simple ones are in kernel_special_simple.cu.
#include "device/coll/run_special.cuh"
#include "device/kernel_body.cuh"
#include "device/kernel_api.h"
#include "device/kernel_entries.h"

namespace weft::dev {

template <int Kind>
__global__ void __launch_bounds__(kLLThreads, 1) weftKernelSpecial(const WEFT_GRID_CONSTANT DevKernelArgs args) {
  __shared__ FlagKernelSmem smem;
  kernelBody<kLLThreads>(args, (int)blockIdx.x, smem,
                         [](const DevWork* w, const WorkEnvT<FlagShared>& env) { runSpecialWork<Kind>(w, env); });
}

const void* specialKernelFunction(int kind) {
  if (specialKernelProto(kind) == kProtoSimple) return specialSimpleKernelEntry(kind);
  if (specialKernelProto(kind) == kProtoLL128) return specialLL128KernelEntry(kind);
  if (kind >= kSpecialLLFunctorFirst) {
    const void* fn = llFunctorKernelEntryPart0(kind);
    return fn != nullptr ? fn : llFunctorKernelEntryPart1(kind);
  }
  switch (kind) {
    case kSpecialDirectSumF32: return reinterpret_cast<const void*>(&weftKernelSpecial<kSpecialDirectSumF32>);
    case kSpecialDirectSumF16: return reinterpret_cast<const void*>(&weftKernelSpecial<kSpecialDirectSumF16>);
    case kSpecialDirectSumBf16: return reinterpret_cast<const void*>(&weftKernelSpecial<kSpecialDirectSumBf16>);
    case kSpecialDirectGather: return reinterpret_cast<const void*>(&weftKernelSpecial<kSpecialDirectGather>);
    default: return nullptr;
  }
}

}  // namespace weft::dev
