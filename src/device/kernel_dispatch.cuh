// Work dispatch shared by the kernel entries (one per protocol, each in its own .cu file so that
// the device build compiles them in parallel): reductions are instantiated once per (operation,
// element type), inlined for the hot functors in the LL kernels (P::kInlineHotWork) and otherwise
// as separate non-inlined device functions, with signed integers folded onto unsigned ones where
// the bits agree (sum, prod, PreMulSum); copy-only functions are instantiated once, on bytes. P is
// the protocol traits type (coll/run_work.cuh).
#pragma once

#include "device/coll/run_direct.cuh"
#include "device/coll/run_tree.cuh"
#include "device/kernel_body.cuh"

namespace weft::dev::dispatch {

template <typename P>
using EnvOf = WorkEnvT<typename P::Shared>;

template <typename P, typename Fn>
WEFT_DEV void runReduceWorkBody(const DevWork* w, EnvOf<P> env) {
  if (w->algo == kAlgoTree) {
    runTreeAllReduce<Fn, P>(*w, env);
    return;
  }
  if constexpr (P::kId == kProtoLL) {
    if (w->algo == kAlgoDirect) {
      runDirectAllReduce<Fn>(*w, env);  // Direct runs on LL only (isSupported)
      return;
    }
  }
  runRingColl<Fn, P>(*w, env);
}

template <typename P, typename Fn>
WEFT_DEV_NOINLINE void runReduceWorkCold(const DevWork* w, EnvOf<P> env) { runReduceWorkBody<P, Fn>(w, env); }

// Hot functors are inlined into the kernel (where the protocol wants it: P::kInlineHotWork), the
// others get one non-inlined body (kHotFn).
template <typename P, typename Fn>
constexpr bool kInlineWork = P::kInlineHotWork && kHotFn<Fn>;

template <typename P, typename Fn>
WEFT_DEV void runReduceWork(const DevWork* w, EnvOf<P> env) {
  if constexpr (kInlineWork<P, Fn>) runReduceWorkBody<P, Fn>(w, env);
  else runReduceWorkCold<P, Fn>(w, env);
}

// Direct (weft's one-hop algorithms): AllReduce and AllGather on LL.
template <typename P>
WEFT_DEV bool directAllowed(const DevWork* w) {
  return P::kId == kProtoLL && w->algo == kAlgoDirect && (w->func == kFuncAllReduce || w->func == kFuncAllGather);
}

template <typename P>
WEFT_DEV void runCopyWorkBody(const DevWork* w, EnvOf<P> env) {
  if constexpr (P::kId == kProtoLL) {
    if (w->algo == kAlgoDirect) {
      runDirectAllGather(*w, env);
      return;
    }
  }
  runRingColl<FnCopy, P>(*w, env);
}
template <typename P>
WEFT_DEV_NOINLINE void runCopyWorkCold(const DevWork* w, EnvOf<P> env) { runCopyWorkBody<P>(w, env); }
template <typename P>
WEFT_DEV void runCopyWork(const DevWork* w, EnvOf<P> env) {
  if constexpr (kInlineWork<P, FnCopy>) runCopyWorkBody<P>(w, env);
  else runCopyWorkCold<P>(w, env);
}

template <typename P>
WEFT_DEV_NOINLINE void runSendRecvWorkCold(const DevWork* w, EnvOf<P> env) { runSendRecv<P>(*w, env); }
template <typename P>
WEFT_DEV void runSendRecvWork(const DevWork* w, EnvOf<P> env) {
  if constexpr (kInlineWork<P, FnCopy>) runSendRecv<P>(*w, env);
  else runSendRecvWorkCold<P>(w, env);
}

// FoldSigned: the operation gives the same bits for signed and unsigned integers.
// IntOnly: the operation exists for integer types only.
template <typename P, template <typename> class Fn, bool FoldSigned, bool IntOnly>
WEFT_DEV void dispatchType(const DevWork* w, EnvOf<P> env) {
  switch (w->dataType) {
    case kInt8:
      if constexpr (FoldSigned) runReduceWork<P, Fn<uint8_t>>(w, env);
      else runReduceWork<P, Fn<int8_t>>(w, env);
      return;
    case kUint8: runReduceWork<P, Fn<uint8_t>>(w, env); return;
    case kInt32:
      if constexpr (FoldSigned) runReduceWork<P, Fn<uint32_t>>(w, env);
      else runReduceWork<P, Fn<int32_t>>(w, env);
      return;
    case kUint32: runReduceWork<P, Fn<uint32_t>>(w, env); return;
    case kInt64:
      if constexpr (FoldSigned) runReduceWork<P, Fn<uint64_t>>(w, env);
      else runReduceWork<P, Fn<int64_t>>(w, env);
      return;
    case kUint64: runReduceWork<P, Fn<uint64_t>>(w, env); return;
    default: break;
  }
  if constexpr (!IntOnly) {
    switch (w->dataType) {
      case kFloat16: runReduceWork<P, Fn<__half>>(w, env); return;
      case kFloat32: runReduceWork<P, Fn<float>>(w, env); return;
      case kFloat64: runReduceWork<P, Fn<double>>(w, env); return;
      case kBfloat16: runReduceWork<P, Fn<__nv_bfloat16>>(w, env); return;
      case kFloat8e4m3: runReduceWork<P, Fn<__nv_fp8_e4m3>>(w, env); return;
      case kFloat8e5m2: runReduceWork<P, Fn<__nv_fp8_e5m2>>(w, env); return;
      default: break;
    }
  }
  arch::trap();  // the host let an unsupported combination through (see isSupported)
}

template <typename P>
WEFT_DEV void dispatchReduce(const DevWork* w, EnvOf<P> env) {
  switch (w->redOp) {
    case kRedSum: dispatchType<P, FnSum, true, false>(w, env); return;
    case kRedProd: dispatchType<P, FnProd, true, false>(w, env); return;
    case kRedMax: dispatchType<P, FnMax, false, false>(w, env); return;
    case kRedMin: dispatchType<P, FnMin, false, false>(w, env); return;
    case kRedPreMulSum: dispatchType<P, FnPreMulSum, true, false>(w, env); return;
    case kRedSumPostDiv: dispatchType<P, FnSumPostDiv, false, true>(w, env); return;
    default: arch::trap();
  }
}

template <typename P>
WEFT_DEV void runWork(const DevWork* w, EnvOf<P> env) {
  if (w->proto != P::kId) arch::trap();  // one launch carries one protocol
  switch (w->func) {
    case kFuncSendRecv: runSendRecvWork<P>(w, env); return;
    case kFuncBroadcast:
    case kFuncAllGather:
      if (w->algo != kAlgoRing && !directAllowed<P>(w)) arch::trap();
      runCopyWork<P>(w, env);
      return;
    case kFuncReduce:
    case kFuncReduceScatter:
      if (w->algo != kAlgoRing) arch::trap();
      dispatchReduce<P>(w, env);
      return;
    case kFuncAllReduce:
      if (w->algo != kAlgoRing && w->algo != kAlgoTree && !directAllowed<P>(w)) arch::trap();
      dispatchReduce<P>(w, env);
      return;
    default: arch::trap();
  }
}

// The general kernels' work runner. A named functor with a force-inlined call (a lambda's call was
// left out of line by the compiler), so the kernel entry holds the dispatch itself: an out-of-line
// level would add its frame (its live registers saved around every call) to the stack that every
// thread of every launch reserves.
template <typename P>
struct WorkRunner {
  WEFT_DEV void operator()(const DevWork* w, const EnvOf<P>& env) const { runWork<P>(w, env); }
};

}  // namespace weft::dev::dispatch
