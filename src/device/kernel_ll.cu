// Kernel entry of the LL protocol (its own translation unit: the device build compiles the
// protocols' instantiations in parallel).
#include "device/kernel_dispatch.cuh"
#include "device/kernel_entries.h"

namespace weft::dev {

__global__ void __launch_bounds__(kLLThreads, 1) weftKernelLL(const WEFT_GRID_CONSTANT DevKernelArgs args) {
  __shared__ FlagKernelSmem smem;
  kernelBody<kLLThreads>(args, (int)blockIdx.x, smem, dispatch::WorkRunner<LLProto>{});
}

const void* llKernelEntry() { return reinterpret_cast<const void*>(&weftKernelLL); }

}  // namespace weft::dev
