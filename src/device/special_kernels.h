// Kernels specialized for one kind of work item (kernel_special.cu). The general LL kernel runs
// every item through a dispatch whose runner is one large non-inlined function with hundreds of
// bytes of spilled registers (cuobjdump: 1808 bytes of stack per thread for the linked kernel,
// against 312 here), which every launch touches cold. For the small calls that Direct serves that
// fixed cost was a third of the time (2xH200, 8-byte all_reduce in a CUDA graph: 11.2 us with the
// general kernel, 7.7 us with this one), so a launch whose items are all of one common kind runs
// a kernel compiled for that kind alone (everything inlined, nothing spilled). The host picks it
// (enqueue/planner.h: specialKernelOfLaunch); NCCL_WEFT_SPECIAL_KERNELS=0 turns the choice off.
// Same block size and launch shape as the LL kernel (kernelThreads(kProtoLL)).
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
