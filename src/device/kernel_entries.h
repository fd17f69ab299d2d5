// The kernel entries of the protocols compiled in their own translation units, as host-side
// addresses for cudaLaunchKernel (null when the protocol is not built for this GPU vendor).
#pragma once

namespace weft::dev {

const void* llKernelEntry();
const void* ll128KernelEntry();
// The specialized Simple kernel of `kind` (special_kernels.h), null for any other kind.
const void* specialSimpleKernelEntry(int kind);
// The specialized LL128 kernel of `kind`, null for any other kind and where LL128 is not built.
const void* specialLL128KernelEntry(int kind);
// The LL functor kernel of `kind` (kernel_ll_functor.cuh), each part null for the kinds it does not build.
const void* llFunctorKernelEntryPart0(int kind);
const void* llFunctorKernelEntryPart1(int kind);

}  // namespace weft::dev
