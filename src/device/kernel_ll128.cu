// Kernel entry of the LL128 protocol (its own translation unit). Built only where the arch layer
// guarantees whole 128-byte warp stores (WEFT_ARCH_HAS_LL128); elsewhere the entry is null and
// isSupported() reports LL128 as missing.
#include "device/kernel_dispatch.cuh"
#include "device/kernel_entries.h"

namespace weft::dev {

#if defined(WEFT_ARCH_HAS_LL128)
__global__ void __launch_bounds__(kLL128Threads, 1) weftKernelLL128(const WEFT_GRID_CONSTANT DevKernelArgs args) {
  __shared__ FlagKernelSmem smem;
  kernelBody<kLL128Threads>(args, (int)blockIdx.x, smem, dispatch::WorkRunner<LL128Proto>{});
}

const void* ll128KernelEntry() { return reinterpret_cast<const void*>(&weftKernelLL128); }
#else
const void* ll128KernelEntry() { return nullptr; }
#endif

}  // namespace weft::dev
