// The kernel entries of the protocols compiled in their own translation units, as host-side
// addresses for cudaLaunchKernel (null when the protocol is not built for this GPU vendor).
#pragma once

namespace weft::dev {

const void* llKernelEntry();
const void* ll128KernelEntry();

}  // namespace weft::dev
