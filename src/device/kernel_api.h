// What the host needs from the device code, in plain C++ (no CUDA syntax): the kernel entry per
// protocol, its launch shape, and which (function, reduction, type) combinations exist. The
// rules for filling DevWork/ConnInfo are at the top of device/work_math.h.
#pragma once

#include <cstddef>

#include "device/abi.h"

namespace weft::dev {

// The __global__ function for cudaLaunchKernel(fn, grid = args.nBlocks, block = kernelThreads(p),
// params = {&args} with args a DevKernelArgs, dynamic smem = kernelDynamicSmem(p), stream).
// Null when the protocol is not built (LL128 needs WEFT_ARCH_HAS_LL128: not on HIP).
const void* kernelFunction(Proto proto);

// The kernel specialized for one kind of item (special_kernels.h: SpecialKernel), launched like
// kernelFunction(specialKernelProto(kind)); null for kSpecialNone or where it is not built.
const void* specialKernelFunction(int kind);

// A plain device-to-device copy kernel (local_copy.cu): params {uint4* dst, const uint4* src,
// uint64_t words, char* dstTail, const char* srcTail, int tailBytes}, block localCopyThreads(),
// any grid. dst and src 16-byte aligned; the last tailBytes (< 16) follow the words.
const void* localCopyKernel();
int localCopyThreads();

// Threads per block; the kernel is compiled for exactly this many (launch bounds).
int kernelThreads(Proto proto);

// Dynamic shared memory per block (the kernel's own state is static shared memory).
size_t kernelDynamicSmem(Proto proto);

// Static shared memory per block, for occupancy reasoning and logs.
size_t kernelStaticSmem(Proto proto);

// Largest/smallest connection step (ConnInfo::stepBytes[proto]) the kernel accepts.
size_t maxStepBytes(Proto proto);
size_t minStepBytes(Proto proto);

// True when the protocol's kernel is built and may run: LL128 only where the arch layer promises
// whole 128-byte warp stores (NVIDIA); which paths may use it is the tuner's call (ll128Usable).
bool protocolUsable(Proto proto);

// True when the device code implements this combination (protocolUsable(proto) first). SendRecv,
// Broadcast and AllGather take any data type (moved as bytes, redOp ignored); reductions take every
// type with sum, prod, min, max and PreMulSum, and integer types with SumPostDiv. Collectives need kAlgoRing (every protocol
// whose kernel is built: kernelFunction(proto) != null); AllReduce also runs kAlgoTree (Simple).
bool isSupported(Func func, Algo algo, Proto proto, RedOp op, DataType type);

// Builds with -DWEFT_DEVICE_PROBE=ON (arch/probe.cuh): prints the launches' mean timeline so far
// to stderr, then clears it. Otherwise nothing.
void reportDeviceProbe(int rank);

}  // namespace weft::dev
