// Kernel entry and work dispatch. One __global__ per protocol; each block serves one channel:
// it copies its work items from the FIFO into shared memory, reports the FIFO slots consumed
// (last block to arrive), then runs the items in order. Reductions are instantiated once per
// (operation, element type) as separate non-inlined device functions, with signed integers
// folded onto unsigned ones where the bits agree (sum, prod, PreMulSum); copy-only functions are
// instantiated once, on bytes.
#include "device/coll/run_tree.cuh"
#include "device/kernel_body.cuh"
#include "device/kernel_api.h"

namespace weft::dev {

namespace {

template <typename Fn>
WEFT_DEV_NOINLINE void runReduceWork(const DevWork* w, WorkEnv env) {
  if (w->algo == kAlgoTree) runTreeAllReduce<Fn>(*w, env);
  else runRingColl<Fn>(*w, env);
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
      if (w->algo != kAlgoRing) arch::trap();
      dispatchReduce(w, env);
      return;
    case kFuncAllReduce:
      if (w->algo != kAlgoRing && w->algo != kAlgoTree) arch::trap();
      dispatchReduce(w, env);
      return;
    default: arch::trap();
  }
}

}  // namespace

__global__ void __launch_bounds__(kSimpleThreads, 1) weftKernelSimple(DevKernelArgs args) {
  __shared__ SimpleKernelSmem smem;
  simpleKernelBody(args, (int)blockIdx.x, smem, [](const DevWork* w, const WorkEnv& env) { runWork(w, env); });
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
  if (proto == kProtoLL128 && !arch::kLL128Safe) return false;  // AMD: see arch/hip.cuh
  if (proto != kProtoSimple || func >= kNumFuncs || op >= kNumRedOps || type >= kNumDataTypes) return false;
  if (func == kFuncSendRecv) return true;
  if (algo != kAlgoRing && !(algo == kAlgoTree && func == kFuncAllReduce)) return false;
  if (func == kFuncBroadcast || func == kFuncAllGather) return true;
  if (op == kRedSumPostDiv) return type <= kUint64;
  return true;
}

}  // namespace weft::dev
