// Kernel entry of the Simple protocol and the host-side queries for every protocol. One
// __global__ per protocol (LL: kernel_ll.cu, LL128: kernel_ll128.cu), each with its own block
// size and launch bounds; each block serves one channel: it copies its work items from the FIFO
// into shared memory, reports the FIFO slots consumed (last block to arrive), then runs the items
// in order (kernel_body.cuh, dispatch in kernel_dispatch.cuh). The general Simple kernel outlines
// its slices' data movement (SimpleProtoT<true>) and runs every item out of line
// (SimpleProtoT::kInlineHotWork): its stack need stays below CUDA's default limit.
#include "device/kernel_dispatch.cuh"
#include "device/functor_sample.h"
#include "device/kernel_api.h"
#include "device/kernel_entries.h"

namespace weft::dev {

__global__ void __launch_bounds__(kSimpleThreads, 1) weftKernelSimple(const WEFT_GRID_CONSTANT DevKernelArgs args) {
  __shared__ SimpleKernelSmem smem;
  kernelBody<kSimpleThreads>(args, (int)blockIdx.x, smem, dispatch::WorkRunner<SimpleProtoT<true>>{});
}

// ---- host-side queries (kernel_api.h) ----

const void* kernelFunction(Proto proto) {
  switch (proto) {
    case kProtoSimple: return reinterpret_cast<const void*>(&weftKernelSimple);
    case kProtoLL: return llKernelEntry();
    case kProtoLL128: return ll128KernelEntry();
    default: return nullptr;
  }
}

int kernelThreads(Proto proto) {
  switch (proto) {
    case kProtoSimple: return kSimpleThreads;
    case kProtoLL: return kLLThreads;
#if defined(WEFT_ARCH_HAS_LL128)
    case kProtoLL128: return kLL128Threads;
#endif
    default: return 0;
  }
}

size_t kernelDynamicSmem(Proto) { return 0; }

size_t kernelStaticSmem(Proto proto) {
  if (kernelFunction(proto) == nullptr) return 0;
  switch (proto) {
    case kProtoSimple: return sizeof(SimpleKernelSmem);
    case kProtoLL:
    case kProtoLL128: return sizeof(FlagKernelSmem);
    default: return 0;
  }
}

size_t maxStepBytes(Proto proto) {
  switch (proto) {
    case kProtoSimple: return kSimpleMaxStepBytes;
    case kProtoLL: return kLLMaxStepBytes;
    case kProtoLL128: return kLL128MaxStepBytes;
    default: return 0;
  }
}

size_t minStepBytes(Proto proto) {
  switch (proto) {
    case kProtoSimple: return kSimpleMinStepBytes;
    case kProtoLL: return kLLMinStepBytes;
    case kProtoLL128: return kLL128MinStepBytes;
    default: return 0;
  }
}

bool protocolUsable(Proto proto) {
  if (proto >= kNumProtos || kernelFunction(proto) == nullptr) return false;
  return proto != kProtoLL128 || arch::kLL128Safe;  // AMD: see arch/hip.cuh
}

bool isSupported(Func func, Algo algo, Proto proto, RedOp op, DataType type) {
  if (func >= kNumFuncs || op >= kNumRedOps || type >= kNumDataTypes || !protocolUsable(proto)) return false;
  if (func == kFuncSendRecv) return true;
  // Direct (weft extension): AllReduce and AllGather on LL. Whether the communicator's
  // connections allow it (every pair connected on a channel, one node) is the planner's check.
  // On Simple, the symmetric AllReduce, AllGather and ReduceScatter: whether a call's buffers
  // allow them is the tuner's check (TuningInput::symmetric).
  const bool direct = algo == kAlgoDirect &&
                      ((proto == kProtoLL && (func == kFuncAllReduce || func == kFuncAllGather)) ||
                       (proto == kProtoSimple &&
                        (func == kFuncAllReduce || func == kFuncAllGather || func == kFuncReduceScatter)));
  if (algo != kAlgoRing && !(algo == kAlgoTree && func == kFuncAllReduce) && !direct) return false;
  if (func == kFuncBroadcast || func == kFuncAllGather) return true;
  if (op == kRedSumPostDiv && type > kUint64) return false;
  return functorInKernels(op, type);  // all but in a compile-check build (functor_sample.h)
}

}  // namespace weft::dev
