// The architecture layer: every instruction whose spelling or memory semantics differ between GPU
// vendors lives behind these functions. Protocols, reductions and algorithms include only this
// header, never <cuda_*.h> intrinsics for synchronization directly.
//
// Memory-ordering vocabulary (PTX memory model; the HIP port maps each to its nearest equivalent):
//  - relaxed.sys: atomic-sized access visible to other GPUs and the host, no ordering by itself;
//  - acquire/release: one-sided ordering at the named scope (cta < gpu < sys);
//  - fence.acq_rel.sys: orders everything this thread has observed (including other warps' writes
//    that reached it through a barrier or a release/acquire pair) before its later stores.
#pragma once

#if defined(WEFT_ARCH_HOST_EMULATION)
#include "device/arch/host_emu.h"  // CPU tests of the data path only
#elif defined(__HIPCC__)
#error "weft: the HIP arch layer (arch/hip.cuh) is not written yet"
#else
#include "device/arch/cuda.cuh"
#endif
