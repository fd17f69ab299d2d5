// Kernel entry and work dispatch. One __global__ per protocol; each block serves one channel:
// it copies its work items from the FIFO into shared memory, reports the FIFO slots consumed
// (last block to arrive), then runs the items in order. Reductions are instantiated once per
// (operation, element type) as separate non-inlined device functions, with signed integers
// folded onto unsigned ones where the bits agree (sum, prod, PreMulSum); copy-only functions are
// instantiated once, on bytes.
#include "device/coll/run_work.cuh"
#include "device/kernel_api.h"

namespace weft::dev {

namespace {

template <typename Fn>
WEFT_DEV_NOINLINE void runReduceWork(const DevWork* w, WorkEnv env) {
  runRingColl<Fn>(*w, env);
}

WEFT_DEV_NOINLINE void runCopyWork(const DevWork* w, WorkEnv env) { runRingColl<FnCopy>(*w, env); }

WEFT_DEV_NOINLINE void runSendRecvWork(const DevWork* w, WorkEnv env) { runSendRecv(*w, env); }

// FoldSigned: the operation gives the same bits for signed and unsigned integers.
// IntOnly: the operation exists for integer types only.
template <template <typename> class Fn, bool FoldSigned, bool IntOnly>
__device__ void dispatchType(const DevWork* w, WorkEnv env) {
  switch (w->dataType) {
    case kInt8:
      if constexpr (FoldSigned) runReduceWork<Fn<uint8_t>>(w, env);
      else runReduceWork<Fn<int8_t>>(w, env);
      return;
    case kUint8: runReduceWork<Fn<uint8_t>>(w, env); return;
    case kInt32:
      if constexpr (FoldSigned) runReduceWork<Fn<uint32_t>>(w, env);
      else runReduceWork<Fn<int32_t>>(w, env);
      return;
    case kUint32: runReduceWork<Fn<uint32_t>>(w, env); return;
    case kInt64:
      if constexpr (FoldSigned) runReduceWork<Fn<uint64_t>>(w, env);
      else runReduceWork<Fn<int64_t>>(w, env);
      return;
    case kUint64: runReduceWork<Fn<uint64_t>>(w, env); return;
    default: break;
  }
  if constexpr (!IntOnly) {
    switch (w->dataType) {
      case kFloat16: runReduceWork<Fn<__half>>(w, env); return;
      case kFloat32: runReduceWork<Fn<float>>(w, env); return;
      case kFloat64: runReduceWork<Fn<double>>(w, env); return;
      case kBfloat16: runReduceWork<Fn<__nv_bfloat16>>(w, env); return;
      case kFloat8e4m3: runReduceWork<Fn<__nv_fp8_e4m3>>(w, env); return;
      case kFloat8e5m2: runReduceWork<Fn<__nv_fp8_e5m2>>(w, env); return;
      default: break;
    }
  }
  arch::trap();  // the host let an unsupported combination through (see isSupported)
}

__device__ void dispatchReduce(const DevWork* w, WorkEnv env) {
  switch (w->redOp) {
    case kRedSum: dispatchType<FnSum, true, false>(w, env); return;
    case kRedProd: dispatchType<FnProd, true, false>(w, env); return;
    case kRedMax: dispatchType<FnMax, false, false>(w, env); return;
    case kRedMin: dispatchType<FnMin, false, false>(w, env); return;
    case kRedPreMulSum: dispatchType<FnPreMulSum, true, false>(w, env); return;
    case kRedSumPostDiv: dispatchType<FnSumPostDiv, false, true>(w, env); return;
    default: arch::trap();
  }
}

__device__ void runWork(const DevWork* w, WorkEnv env) {
  if (w->proto != kProtoSimple) arch::trap();
  switch (w->func) {
    case kFuncSendRecv: runSendRecvWork(w, env); return;
    case kFuncBroadcast:
    case kFuncAllGather:
      if (w->algo != kAlgoRing) arch::trap();
      runCopyWork(w, env);
      return;
    case kFuncReduce:
    case kFuncReduceScatter:
    case kFuncAllReduce:
      if (w->algo != kAlgoRing) arch::trap();
      dispatchReduce(w, env);
      return;
    default: arch::trap();
  }
}

struct SimpleKernelSmem {
  DevWork works[kMaxWorksPerChannel];
  SimpleShared proto;
};

}  // namespace

__global__ void __launch_bounds__(kSimpleThreads, 1) weftKernelSimple(DevKernelArgs args) {
  __shared__ SimpleKernelSmem smem;
  const DevKernelArgs::Block blk = args.blocks[blockIdx.x];
  const int nWorks = blk.count < kMaxWorksPerChannel ? blk.count : kMaxWorksPerChannel;

  // Copy the items with 8-byte volatile loads: the FIFO is host memory rewritten between
  // launches, so nothing may come from a cache.
  constexpr int kWords = sizeof(DevWork) / sizeof(uint64_t);
  static_assert(sizeof(DevWork) % sizeof(uint64_t) == 0, "DevWork is copied in 8-byte words");
  for (int i = threadIdx.x; i < nWorks * kWords; i += blockDim.x) {
    const int w = i / kWords;
    const DevWork* src = &args.works[(blk.first + (uint32_t)w) & args.worksMask];
    reinterpret_cast<uint64_t*>(&smem.works[w])[i % kWords] =
        arch::ldN<8>(reinterpret_cast<const uint64_t*>(src) + i % kWords);
  }
  if (threadIdx.x == 0) {
    for (int g = 0; g < kSimpleMaxGroups; g++)
      for (int d = 0; d < kSimpleReadyDepth; d++) smem.proto.done[g][d] = 0;
    smem.proto.aborted = 0;
  }
  __syncthreads();

  // Every block has its items: the last one to arrive frees the FIFO slots for the host.
  if (threadIdx.x == 0 && args.blockArrivals) {
    if (arch::atomicAddAcqRelGpu(args.blockArrivals, 1) == args.nBlocks - 1) {
      arch::stRelaxedGpu(args.blockArrivals, 0);
      if (args.fifoConsumed) arch::stReleaseSys(args.fifoConsumed, args.fifoConsumedValue);
    }
  }

  const WorkEnv env{args.comm, blk.channel, &smem.proto};
  for (int i = 0; i < nWorks; i++) {
    runWork(&smem.works[i], env);
    __syncthreads();  // the next item reloads the connections' steps this one saved
  }
}

// ---- host-side queries (kernel_api.h) ----

const void* kernelFunction(Proto proto) {
  return proto == kProtoSimple ? reinterpret_cast<const void*>(&weftKernelSimple) : nullptr;
}

int kernelThreads(Proto proto) { return proto == kProtoSimple ? kSimpleThreads : 0; }

size_t kernelDynamicSmem(Proto) { return 0; }

size_t kernelStaticSmem(Proto proto) { return proto == kProtoSimple ? sizeof(SimpleKernelSmem) : 0; }

size_t maxStepBytes(Proto proto) { return proto == kProtoSimple ? kSimpleMaxStepBytes : 0; }
size_t minStepBytes(Proto proto) { return proto == kProtoSimple ? kSimpleMinStepBytes : 0; }

bool isSupported(Func func, Algo algo, Proto proto, RedOp op, DataType type) {
  if (proto != kProtoSimple || func >= kNumFuncs || op >= kNumRedOps || type >= kNumDataTypes) return false;
  if (func == kFuncSendRecv) return true;
  if (algo != kAlgoRing) return false;
  if (func == kFuncBroadcast || func == kFuncAllGather) return true;
  if (op == kRedSumPostDiv) return type <= kUint64;
  return true;
}

}  // namespace weft::dev
