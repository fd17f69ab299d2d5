// The work runners of the specialized kernels (special_kernels.h): one kind of item each, with
// the item's kind checked (a launch the host mixed up traps rather than misreads an item).
// Separate from the kernel entries so that CPU tests run the same runners.
#pragma once

#include <type_traits>

#include "device/coll/run_direct.cuh"
#include "device/coll/run_symmetric.cuh"
#include "device/special_kernels.h"

namespace weft::dev {

// Shared: the shared state of the kind's protocol (FlagShared for LL, SimpleShared for Simple).
template <int Kind, typename Shared>
WEFT_DEV void runSpecialWork(const DevWork* w, const WorkEnvT<Shared>& env) {
  if (specialKernelOf(*w) != specialItemKind(Kind)) arch::trap();
  if constexpr (specialKernelProto(Kind) == kProtoLL) {
    static_assert(std::is_same_v<Shared, FlagShared>, "an LL kind runs in an LL-shaped kernel");
    if constexpr (Kind == kSpecialDirectSumF32) runDirectAllReduce<FnSum<float>>(*w, env);
    else if constexpr (Kind == kSpecialDirectSumF16) runDirectAllReduce<FnSum<__half>>(*w, env);
    else if constexpr (Kind == kSpecialDirectSumBf16) runDirectAllReduce<FnSum<__nv_bfloat16>>(*w, env);
    else if constexpr (Kind == kSpecialDirectGather) runDirectAllGather(*w, env);
    else static_assert(Kind == kSpecialDirectGather, "no runner for this kind");
  } else if constexpr (specialKernelProto(Kind) == kProtoLL128) {
#if defined(WEFT_ARCH_HAS_LL128)
    static_assert(std::is_same_v<Shared, FlagShared>, "an LL128 kind runs in an LL128-shaped kernel");
    if constexpr (Kind == kSpecialLL128SumF32) runRingColl<FnSum<float>, LL128Proto>(*w, env);
    else if constexpr (Kind == kSpecialLL128SumF16) runRingColl<FnSum<__half>, LL128Proto>(*w, env);
    else if constexpr (Kind == kSpecialLL128SumBf16) runRingColl<FnSum<__nv_bfloat16>, LL128Proto>(*w, env);
    else if constexpr (Kind == kSpecialLL128Copy) runRingColl<FnCopy, LL128Proto>(*w, env);
    else static_assert(Kind == kSpecialLL128Copy, "no runner for this kind");
#else
    static_assert(Kind < 0, "LL128 kinds are built only where the arch has LL128");
#endif
  } else {
    static_assert(std::is_same_v<Shared, SimpleShared>, "a Simple kind runs in a Simple-shaped kernel");
    using P = SimpleProtoT<specialKernelOutlinesCopies(Kind), /*SplitRoles=*/true,
                           specialKernelNarrowCopies(Kind) ? kNarrowCopyUnroll : kCopyUnroll>;
    constexpr int kItems = specialItemKind(Kind);
    if constexpr (kItems == kSpecialRingSumF32) runRingColl<FnSum<float>, P>(*w, env);
    else if constexpr (kItems == kSpecialRingSumF16) runRingColl<FnSum<__half>, P>(*w, env);
    else if constexpr (kItems == kSpecialRingSumBf16) runRingColl<FnSum<__nv_bfloat16>, P>(*w, env);
    else if constexpr (Kind == kSpecialRingCopy) runRingColl<FnCopy, P>(*w, env);
    else if constexpr (Kind == kSpecialSendRecv) runSendRecv<P>(*w, env);
    else if constexpr (Kind == kSpecialSymSumF32) runSymmetricReduce<FnSum<float>, true>(*w, env);
    else if constexpr (Kind == kSpecialSymSumF16) runSymmetricReduce<FnSum<__half>, true>(*w, env);
    else if constexpr (Kind == kSpecialSymSumBf16) runSymmetricReduce<FnSum<__nv_bfloat16>, true>(*w, env);
    else if constexpr (Kind == kSpecialSymGather) runSymmetricAllGather<true>(*w, env);
    else static_assert(Kind == kSpecialSymGather, "no runner for this kind");
  }
}

}  // namespace weft::dev
