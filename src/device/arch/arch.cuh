// The architecture layer: every instruction whose spelling or memory semantics differ between GPU
// vendors lives behind these functions. Protocols, reductions and algorithms include only this
// header, never <cuda_*.h> intrinsics for synchronization directly.
//
// Portable code never assumes a warp width: it uses kWarpSize (32 on NVIDIA, 64 on AMD) and
// LaneMask (a bit per lane: 32 or 64 bits), and calls initBlock() at kernel start.
//
// Memory-ordering vocabulary (PTX memory model; hip.cuh maps each to its nearest AMD equivalent):
//  - relaxed.sys: atomic-sized access visible to other GPUs and the host, no ordering by itself;
//  - acquire/release: one-sided ordering at the named scope (cta < gpu < sys);
//  - fence.acq_rel.sys: orders everything this thread has observed (including other warps' writes
//    that reached it through a barrier or a release/acquire pair) before its later stores.
#pragma once

#if defined(WEFT_ARCH_HOST_EMULATION)
#include "device/arch/host_emu.h"  // CPU tests of the data path only
#elif defined(WEFT_GPU_HIP) || defined(__HIP__)
#include "device/arch/hip.cuh"  // AMD: 64-lane wavefronts, software named barriers
#else
#include "device/arch/cuda.cuh"
#endif
