// Kernels specialized for one kind of work item (kernel_special.cu). The general LL kernel runs
// every item through a dispatch whose runner is one large non-inlined function: hundreds of
// bytes of spilled registers per thread in local memory (ptxas: an 888-byte stack frame), which
// every launch touches cold. For the small calls that Direct serves that fixed cost is most of the
// time, so a launch whose items are all of one common kind runs a kernel compiled for that kind
// alone (everything inlined, no spills). The host picks it (enqueue/planner.h:
// specialKernelOfLaunch); NCCL_WEFT_SPECIAL_KERNELS=0 turns the choice off. Same block size and
// launch shape as the LL kernel (kernelThreads(kProtoLL)).
#pragma once

#include "device/abi.h"

namespace weft::dev {

enum SpecialKernel : int {
  kSpecialNone = 0,
  kSpecialDirectSumF32,   // Direct AllReduce (one- or two-shot), sum of float
  kSpecialDirectSumF16,   // ... of half
  kSpecialDirectSumBf16,  // ... of bfloat16
  kSpecialDirectGather,   // Direct AllGather (any type: moved as bytes)
  kNumSpecialKernels
};

// The specialized kernel that can run item w, or kSpecialNone.
WEFT_HD SpecialKernel specialKernelOf(const DevWork& w) {
  if (w.algo != kAlgoDirect || w.proto != kProtoLL) return kSpecialNone;
  if (w.func == kFuncAllGather) return kSpecialDirectGather;
  if (w.func != kFuncAllReduce || w.redOp != kRedSum) return kSpecialNone;
  switch (w.dataType) {
    case kFloat32: return kSpecialDirectSumF32;
    case kFloat16: return kSpecialDirectSumF16;
    case kBfloat16: return kSpecialDirectSumBf16;
    default: return kSpecialNone;
  }
}

}  // namespace weft::dev
