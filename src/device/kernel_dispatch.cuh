// Work dispatch shared by the kernel entries (one per protocol, each in its own .cu file so that
// the device build compiles them in parallel): reductions are instantiated once per (operation,
// element type), inlined for the hot functors in the LL kernels (P::kInlineHotWork) and otherwise
// as separate non-inlined device functions, with signed integers folded onto unsigned ones where
// the bits agree (reduce/functor_visit.cuh); copy-only functions are instantiated once, on bytes. P is
// the protocol traits type (coll/run_work.cuh).
#pragma once

#include "device/coll/run_direct.cuh"
#include "device/coll/run_symmetric.cuh"
#include "device/coll/run_tree.cuh"
#include "device/functor_sample.h"
#include "device/kernel_body.cuh"
#include "device/reduce/functor_visit.cuh"

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
      runDirectAllReduce<Fn>(*w, env);
      return;
    }
  }
  if constexpr (P::kId == kProtoSimple) {
    if (w->algo == kAlgoDirect) {  // the symmetric collectives (coll/run_symmetric.cuh)
      runSymmetricReduce<Fn>(*w, env);
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

// Direct (weft's one-hop algorithms): AllReduce and AllGather on LL; on Simple the symmetric
// AllReduce, AllGather and ReduceScatter.
template <typename P>
WEFT_DEV bool directAllowed(const DevWork* w) {
  if (w->algo != kAlgoDirect) return false;
  if (P::kId == kProtoLL) return w->func == kFuncAllReduce || w->func == kFuncAllGather;
  return P::kId == kProtoSimple &&
         (w->func == kFuncAllReduce || w->func == kFuncAllGather || w->func == kFuncReduceScatter);
}

template <typename P>
WEFT_DEV void runCopyWorkBody(const DevWork* w, EnvOf<P> env) {
  if constexpr (P::kId == kProtoLL) {
    if (w->algo == kAlgoDirect) {
      runDirectAllGather(*w, env);
      return;
    }
  }
  if constexpr (P::kId == kProtoSimple) {
    if (w->algo == kAlgoDirect) {
      runSymmetricAllGather(*w, env);
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

// The reduction items' runner for visitFunctor: only the functors this build's kernels carry
// (functor_sample.h; all of them but in a compile-check build, whose host refuses the others).
template <typename P>
struct ReduceRunner {
  const DevWork* w;
  EnvOf<P> env;
  template <int Op, int Type, typename Fn>
  WEFT_DEV void run() const {
    if constexpr (functorInKernels(Op, Type)) runReduceWork<P, Fn>(w, env);
    else arch::trap();
  }
};

template <typename P>
WEFT_DEV void dispatchReduce(const DevWork* w, EnvOf<P> env) {
  visitFunctor(w->redOp, w->dataType, ReduceRunner<P>{w, env});
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
      if (w->algo != kAlgoRing) arch::trap();
      dispatchReduce<P>(w, env);
      return;
    case kFuncReduceScatter:
      if (w->algo != kAlgoRing && !directAllowed<P>(w)) arch::trap();
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
