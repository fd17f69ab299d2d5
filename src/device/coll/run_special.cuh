// The work runners of the specialized kernels (special_kernels.h): one kind of item each, with
// the item's kind checked (a launch the host mixed up traps rather than misreads an item).
// Separate from kernel_special.cu so that CPU tests run the same runners.
#pragma once

#include "device/coll/run_direct.cuh"
#include "device/special_kernels.h"

namespace weft::dev {

template <int Kind>
WEFT_DEV void runSpecialWork(const DevWork* w, const WorkEnvT<FlagShared>& env) {
  if (specialKernelOf(*w) != Kind) arch::trap();
  if constexpr (Kind == kSpecialDirectSumF32) runDirectAllReduce<FnSum<float>>(*w, env);
  else if constexpr (Kind == kSpecialDirectSumF16) runDirectAllReduce<FnSum<__half>>(*w, env);
  else if constexpr (Kind == kSpecialDirectSumBf16) runDirectAllReduce<FnSum<__nv_bfloat16>>(*w, env);
  else if constexpr (Kind == kSpecialDirectGather) runDirectAllGather(*w, env);
  else static_assert(Kind == kSpecialDirectGather, "no runner for this kind");
}

}  // namespace weft::dev
