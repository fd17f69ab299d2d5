// Kernels specialized for one kind of work item (kernel_special.cu for LL, kernel_special_simple.cu
// for Simple and the symmetric collectives, kernel_special_ll128.cu for LL128). The general
// kernels run every item through a dispatch over every function, algorithm, reduction and type,
// all in one function: ptxas gives the Simple kernel's runner a 1440-byte frame and 22,784 bytes
// of spill stores, and the LL kernel's runner 1808 bytes of stack per thread (cuobjdump, linked),
// which every launch touches cold and the Simple copy loops pay for on every slice. A kernel
// compiled for one kind spills little or nothing (Simple Ring sums with outlined slice copies:
// none; Direct: no stack since session 7, when the per-peer and per-slot arrays left local
// memory: reg_array.h). Measured on 2xH200 against the general kernels (session 5 and 6): 8-byte Direct all_reduce in a CUDA graph 11.2 -> 7.7 us;
// busbw at 1 GiB reduce 244 -> 332 GB/s, reduce_scatter 244 -> 314, all_reduce 290 -> 311; one
// rank, graph, 8 bytes 9.0 -> 5.9 us. So a launch whose items are all of one common kind runs the
// kernel of that kind. The host picks it (enqueue/planner.h: specialKernelOfLaunch);
// NCCL_WEFT_SPECIAL_KERNELS=0 turns the choice off. Each kind has the launch shape (block size,
// shared memory) of its protocol's general kernel: specialKernelProto().
#pragma once

#include "device/abi.h"

namespace weft::dev {

enum SpecialKernel : int {
  kSpecialNone = 0,
  // LL
  kSpecialDirectSumF32,   // Direct AllReduce (one- or two-shot), sum of float
  kSpecialDirectSumF16,   // ... of half
  kSpecialDirectSumBf16,  // ... of bfloat16
  kSpecialDirectGather,   // Direct AllGather (any type: moved as bytes)
  // Simple
  kSpecialRingSumF32,     // Ring AllReduce, Reduce or ReduceScatter, sum of float
  kSpecialRingSumF16,     // ... of half
  kSpecialRingSumBf16,    // ... of bfloat16
  kSpecialRingCopy,       // Ring Broadcast or AllGather (any type: moved as bytes)
  kSpecialSendRecv,       // SendRecv (any type)
  // The Ring sums again, for launches of small items (planner.h specialKernelOfLaunch): every
  // slice's copies inlined, pure copies kNarrowCopyUnroll wide (spill-free; see
  // specialKernelOutlinesCopies). They run the items of their twin (specialItemKind).
  kSpecialRingSumInlineF32,
  kSpecialRingSumInlineF16,
  kSpecialRingSumInlineBf16,
  // The symmetric collectives (coll/run_symmetric.cuh: Direct items on Simple, buffers in
  // symmetric windows). In the general Simple kernel a 2-rank 8-byte AllReduce took 9.95 us on one
  // H200 (graph), of which ~6 us is that kernel's frame and dispatch (session 29, call B).
  kSpecialSymSumF32,      // symmetric AllReduce or ReduceScatter, sum of float
  kSpecialSymSumF16,      // ... of half
  kSpecialSymSumBf16,     // ... of bfloat16
  kSpecialSymGather,      // symmetric AllGather (any type: moved as bytes)
  // LL128 (built where the arch has LL128). Its general kernel runs every functor out of line, so
  // that its stack fits CUDA's default (1216 B with these inlined there: session 16); these
  // kernels inline one each: Ring only (Tree/LL128 is forced only, on one node).
  kSpecialLL128SumF32,    // Ring AllReduce, Reduce or ReduceScatter, sum of float
  kSpecialLL128SumF16,    // ... of half
  kSpecialLL128SumBf16,   // ... of bfloat16
  kSpecialLL128Copy,      // Ring Broadcast or AllGather (any type: moved as bytes)
  kNumSpecialKernels,
  // LL reductions (AllReduce on Ring or Direct; Reduce, ReduceScatter on Ring) with one of the
  // functors the general LL kernel runs out of line (every one but the sums of float, half and
  // bfloat16; not fp8): kind kSpecialLLFunctorFirst + redOp * kNumDataTypes + type, signed
  // integers folded onto unsigned ones where the bits agree (llFunctorKind). kernel_ll_functor*.cu.
  // Tree (forced only, on one node) and fp8 stay with the general kernel: each kernel costs
  // device-build time, which CI pays on two cores beside the HIP build.
  kSpecialLLFunctorFirst = kNumSpecialKernels,
  kNumSpecialKinds = kSpecialLLFunctorFirst + kNumRedOps * kNumDataTypes
};

// The protocol whose launch shape the kernel of `kind` has.
WEFT_HD constexpr Proto specialKernelProto(int kind) {
  if (kind >= kSpecialRingSumF32 && kind <= kSpecialSymGather) return kProtoSimple;
  if (kind >= kSpecialLL128SumF32 && kind <= kSpecialLL128Copy) return kProtoLL128;
  return kProtoLL;
}

// Whether (op, type) is one of the functors the general LL kernel inlines (dispatch's kHotFn on
// NVIDIA): those never need a functor kernel.
WEFT_HD constexpr bool llInlinedFunctor(int op, int type) {
  return op == kRedSum && (type == kFloat32 || type == kFloat16 || type == kBfloat16);
}

// The same bits for signed and unsigned integers: sum, product, PreMulSum (two's complement).
WEFT_HD constexpr bool redOpFoldsSigned(int op) { return op == kRedSum || op == kRedProd || op == kRedPreMulSum; }

WEFT_HD constexpr int unsignedTwin(int type) {
  return type == kInt8 ? kUint8 : type == kInt32 ? kUint32 : type == kInt64 ? kUint64 : type;
}

WEFT_HD constexpr bool isIntegerType(int type) { return type <= kUint64; }

// The functor kernel of LL reductions with (op, type), or kSpecialNone where there is none: an
// inlined functor, a pair that does not exist (SumPostDiv is for integers only).
WEFT_HD constexpr int llFunctorKind(int op, int type) {
  if (op < 0 || op >= kNumRedOps || type < 0 || type >= kNumDataTypes) return kSpecialNone;
  if (op == kRedSumPostDiv && !isIntegerType(type)) return kSpecialNone;
  if (type == kFloat8e4m3 || type == kFloat8e5m2) return kSpecialNone;
  if (redOpFoldsSigned(op)) type = unsignedTwin(type);
  if (llInlinedFunctor(op, type)) return kSpecialNone;
  return kSpecialLLFunctorFirst + op * kNumDataTypes + type;
}
WEFT_HD constexpr int llFunctorKindOp(int kind) { return (kind - kSpecialLLFunctorFirst) / kNumDataTypes; }
WEFT_HD constexpr int llFunctorKindType(int kind) { return (kind - kSpecialLLFunctorFirst) % kNumDataTypes; }
// Whether item w belongs in the functor kernel of `kind` (a built one): specialKernelOf(w) == kind,
// as a few comparisons with the kind's constants (the kernel checks every item it runs).
WEFT_HD constexpr bool fitsLLFunctorKind(const DevWork& w, int kind) {
  const int op = llFunctorKindOp(kind), type = llFunctorKindType(kind);
  const bool reduction = w.func == kFuncAllReduce || w.func == kFuncReduce || w.func == kFuncReduceScatter;
  const bool typeFits = w.dataType == type || (redOpFoldsSigned(op) && unsignedTwin(w.dataType) == type);
  return w.proto == kProtoLL && w.algo != kAlgoTree && reduction && w.redOp == op && typeFits;
}

// Whether `kind` is a functor kernel that exists (the range has holes: folded and inlined pairs).
WEFT_HD constexpr bool llFunctorKindBuilt(int kind) {
  return kind >= kSpecialLLFunctorFirst && kind < kNumSpecialKinds &&
         llFunctorKind(llFunctorKindOp(kind), llFunctorKindType(kind)) == kind;
}

// Simple kinds whose slices call a non-inlined reduceCopy (SimplePrims' OutlineCopies). Measured
// on 2xH200, busbw at 64M/256M/1G against the same kernels with the copies inlined (session 6):
// all_reduce 284/312/319 vs 256/278/286 GB/s, reduce_scatter 239/296/317 vs 215/279/293; reduce
// 317/330/331 vs 311/337/347 is the one loss. Session 7 tried Reduce-only kinds with inlined
// copies (304-byte frame, 520 bytes of spill stores): 281/288/289 against 337/348/349 for the
// outlined sum kernel, so Reduce stays with the sums. Copies gain nothing from outlining
// (broadcast 309/336/350 vs 308/336/347) and SendRecv loses (alltoall 246/292/313 vs
// 255/308/328), so they stay inlined. Small copies lose too: with the primitives split by role
// (session 18), an outlined Ring copy took 8 B - 256 KiB all_gather from 6.9-8.4 to 8.2-9.9 us
// (one H200, two ranks, graph): each call saves and restores ~30 registers in local memory.
// Session 19: with the roles split, the three reductions in one loop (ring.cuh ringSumColl) and
// kNarrowCopyUnroll for pure copies, the sums inline everything spill-free (kSpecialRingSumInline*;
// with copies 8 packs wide: 144 bytes of stack). One H200, two ranks, graph, Simple: all_reduce
// 16 B - 64 KiB 7.9-9.3 us against 9.4-10.8 outlined, reduce 4.3 vs 4.8, reduce_scatter 5.7-6.3
// vs 6.5-7.3, all_reduce 4 MiB 16.4 vs 18.2; but all_reduce 64/256 MiB 164/616 against 158/594 and
// reduce_scatter 256 MiB 383 against 374. So launches of small items take the inlined twin.
WEFT_HD constexpr bool specialKernelOutlinesCopies(int kind) {
  return kind == kSpecialRingSumF32 || kind == kSpecialRingSumF16 || kind == kSpecialRingSumBf16;
}
WEFT_HD constexpr bool specialKernelNarrowCopies(int kind) {
  return kind >= kSpecialRingSumInlineF32 && kind <= kSpecialRingSumInlineBf16;
}
// The kind of the items a kernel runs: its own, or its twin's for the inlined Ring sums.
WEFT_HD constexpr int specialItemKind(int kind) {
  return specialKernelNarrowCopies(kind) ? kind - kSpecialRingSumInlineF32 + kSpecialRingSumF32 : kind;
}
// The inlined twin of a Ring-sum kind; every other kind is its own.
WEFT_HD constexpr int specialInlineTwin(int kind) {
  return specialKernelOutlinesCopies(kind) ? kind - kSpecialRingSumF32 + kSpecialRingSumInlineF32 : kind;
}

namespace detail {
WEFT_HD SpecialKernel sumKernelOf(int dataType, SpecialKernel f32, SpecialKernel f16, SpecialKernel bf16) {
  switch (dataType) {
    case kFloat32: return f32;
    case kFloat16: return f16;
    case kBfloat16: return bf16;
    default: return kSpecialNone;
  }
}
}  // namespace detail

// The specialized kernel that can run item w, or kSpecialNone.
WEFT_HD SpecialKernel specialKernelOf(const DevWork& w) {
  const bool sum = w.redOp == kRedSum;
  if (w.proto == kProtoLL) {
    // The Direct kinds first: their kernels check their items with this function, on the
    // latency path (the functor mapping below costs ~0.2 us more per launch, measured).
    if (w.algo == kAlgoDirect && w.func == kFuncAllGather) return kSpecialDirectGather;
    if (w.algo == kAlgoDirect && w.func == kFuncAllReduce && sum) {
      const SpecialKernel k =
          detail::sumKernelOf(w.dataType, kSpecialDirectSumF32, kSpecialDirectSumF16, kSpecialDirectSumBf16);
      if (k != kSpecialNone) return k;
    }
    const bool reduction = w.func == kFuncAllReduce || w.func == kFuncReduce || w.func == kFuncReduceScatter;
    return reduction && w.algo != kAlgoTree ? (SpecialKernel)llFunctorKind(w.redOp, w.dataType) : kSpecialNone;
  }
  if (w.proto == kProtoLL128) {
    if (w.algo != kAlgoRing) return kSpecialNone;
    if (w.func == kFuncBroadcast || w.func == kFuncAllGather) return kSpecialLL128Copy;
    const bool reduction = w.func == kFuncAllReduce || w.func == kFuncReduce || w.func == kFuncReduceScatter;
    if (!reduction || !sum) return kSpecialNone;
    return detail::sumKernelOf(w.dataType, kSpecialLL128SumF32, kSpecialLL128SumF16, kSpecialLL128SumBf16);
  }
  if (w.proto != kProtoSimple) return kSpecialNone;
  if (w.func == kFuncSendRecv) return kSpecialSendRecv;
  if (w.algo == kAlgoDirect) {  // symmetric
    if (w.func == kFuncAllGather) return kSpecialSymGather;
    if ((w.func != kFuncAllReduce && w.func != kFuncReduceScatter) || !sum) return kSpecialNone;
    return detail::sumKernelOf(w.dataType, kSpecialSymSumF32, kSpecialSymSumF16, kSpecialSymSumBf16);
  }
  if (w.algo != kAlgoRing) return kSpecialNone;
  if (w.func == kFuncBroadcast || w.func == kFuncAllGather) return kSpecialRingCopy;
  const bool reduction = w.func == kFuncAllReduce || w.func == kFuncReduce || w.func == kFuncReduceScatter;
  if (!reduction || !sum) return kSpecialNone;
  return detail::sumKernelOf(w.dataType, kSpecialRingSumF32, kSpecialRingSumF16, kSpecialRingSumBf16);
}

}  // namespace weft::dev
