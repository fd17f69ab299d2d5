// Entries of the specialized LL128 kernels (special_kernels.h): the LL128 kernel's body with one
// kind of item (Ring sums of float/half/bfloat16, Ring copies), every call inlined. The general
// LL128 kernel runs every item out of line (its stack: FlagProto::kInlineHotWork), which costs a
// small call ~1.6 us (session 16); a kernel of one kind has the registers to itself instead.
// Built only where the arch layer guarantees whole 128-byte warp stores (kernel_ll128.cu).
#include "device/coll/run_special.cuh"
#include "device/kernel_body.cuh"
#include "device/kernel_entries.h"

namespace weft::dev {

#if defined(WEFT_ARCH_HAS_LL128)
template <int Kind>
__global__ void __launch_bounds__(kLL128Threads, 1) weftKernelSpecialLL128(const WEFT_GRID_CONSTANT DevKernelArgs args) {
  __shared__ FlagKernelSmem smem;
  kernelBody<kLL128Threads>(args, (int)blockIdx.x, smem,
                            [](const DevWork* w, const WorkEnvT<FlagShared>& env) { runSpecialWork<Kind>(w, env); });
}

const void* specialLL128KernelEntry(int kind) {
  switch (kind) {
    case kSpecialLL128SumF32: return reinterpret_cast<const void*>(&weftKernelSpecialLL128<kSpecialLL128SumF32>);
    case kSpecialLL128SumF16: return reinterpret_cast<const void*>(&weftKernelSpecialLL128<kSpecialLL128SumF16>);
    case kSpecialLL128SumBf16: return reinterpret_cast<const void*>(&weftKernelSpecialLL128<kSpecialLL128SumBf16>);
    case kSpecialLL128Copy: return reinterpret_cast<const void*>(&weftKernelSpecialLL128<kSpecialLL128Copy>);
    default: return nullptr;
  }
}
#else
const void* specialLL128KernelEntry(int) { return nullptr; }
#endif

}  // namespace weft::dev
