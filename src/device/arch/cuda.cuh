// CUDA (sm_70+) implementation of the arch layer. Inline PTX is used wherever the memory
// semantics matter, so that the compiler can neither drop nor merge the access and the scope is
// explicit. Data loads go through ld.volatile, which bypasses the (non-coherent) L1: connection
// buffers are written by other GPUs, and user buffers may have been written by other SMs.
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#define WEFT_DEV __device__ __forceinline__
#define WEFT_DEV_NOINLINE __device__ __noinline__
// Kernel parameters read in place (no per-thread copy), so a large argument struct costs nothing.
#define WEFT_GRID_CONSTANT __grid_constant__
#define WEFT_UNROLL _Pragma("unroll")

namespace weft::dev::arch {

constexpr int kWarpSize = 32;
using LaneMask = uint32_t;  // one bit per lane
constexpr int kMaxBlockThreads = 1024;
constexpr int kDefaultBlockThreads = 512;  // what the protocols are sized for
constexpr int kNamedBarriers = 16;  // hardware barriers per block; id 0 is __syncthreads
// LL128's premise: a warp's 128-byte store arrives whole (per-path checks stay with the host).
constexpr bool kLL128Safe = true;

// 16 bytes moved by one vector instruction.
struct alignas(16) Pack16 {
  uint32_t w[4];
};

WEFT_DEV int threadId() { return (int)threadIdx.x; }
WEFT_DEV int laneId() { return threadIdx.x & (kWarpSize - 1); }
WEFT_DEV int warpId() { return threadIdx.x / kWarpSize; }

template <typename To, typename From>
WEFT_DEV To bitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bitCast needs equal sizes");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// ---- data path: plain-memory loads and stores ---------------------------------------------

WEFT_DEV Pack16 ld16(const void* p) {
  Pack16 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(p));
  return v;
}

WEFT_DEV void st16(void* p, const Pack16& v) {
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]),
               "r"(v.w[2]), "r"(v.w[3])
               : "memory");
}

// Loads/stores of 1, 2, 4 or 8 bytes, returned zero-extended in a uint64_t.
template <int Bytes>
WEFT_DEV uint64_t ldN(const void* p) {
  static_assert(Bytes == 1 || Bytes == 2 || Bytes == 4 || Bytes == 8, "unsupported width");
  if constexpr (Bytes == 8) {
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p));
    return v;
  } else {
    uint32_t v;
    if constexpr (Bytes == 4) asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    if constexpr (Bytes == 2) asm volatile("ld.volatile.global.u16 %0, [%1];" : "=r"(v) : "l"(p));
    if constexpr (Bytes == 1) asm volatile("ld.volatile.global.u8 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
  }
}

template <int Bytes>
WEFT_DEV void stN(void* p, uint64_t v) {
  static_assert(Bytes == 1 || Bytes == 2 || Bytes == 4 || Bytes == 8, "unsupported width");
  if constexpr (Bytes == 8) {
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  } else {
    uint32_t x = (uint32_t)v;
    if constexpr (Bytes == 4) asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(x) : "memory");
    if constexpr (Bytes == 2) asm volatile("st.global.u16 [%0], %1;" ::"l"(p), "r"(x) : "memory");
    if constexpr (Bytes == 1) asm volatile("st.global.u8 [%0], %1;" ::"l"(p), "r"(x) : "memory");
  }
}

// ---- flag-carrying lines (LL, LL128) ------------------------------------------------------
// LL: a 16-byte line {data, flag, data, flag} travels in ONE 16-byte access on both ends, so a
// reader that sees both flags also sees both data words. LL128: the 8 lanes of a 128-byte line
// store (and load) their 16-byte parts in one warp instruction; NVLink delivers such a line whole,
// so the flag in its last 8 bytes vouches for the other 120. Whole warps call ll128Load/Store
// with the same slot order on every lane (the host emulation needs the warp together); `flag`
// says the caller holds its line's flag part, `active` whether it takes part at all.
#define WEFT_ARCH_HAS_LL128 1

WEFT_DEV Pack16 ldLine16(const void* p) { return ld16(p); }  // ld16 is already one volatile v4 load

WEFT_DEV void stLine16(void* p, const Pack16& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]),
               "r"(v.w[2]), "r"(v.w[3])
               : "memory");
}

// Predicated in the instruction rather than branched around, so that no `active` test can split
// the warp between the caller's syncWarp and the access.
WEFT_DEV Pack16 ll128Load(const void* p, bool /*flag*/, bool active) {
  uint64_t a = 0, b = 0;
  asm volatile(
      "{ .reg .pred on; setp.ne.u32 on, %3, 0;\n"
      "@on ld.volatile.global.v2.u64 {%0,%1}, [%2]; }"
      : "+l"(a), "+l"(b)
      : "l"(p), "r"((uint32_t)active)
      : "memory");
  Pack16 v;
  v.w[0] = (uint32_t)a;
  v.w[1] = (uint32_t)(a >> 32);
  v.w[2] = (uint32_t)b;
  v.w[3] = (uint32_t)(b >> 32);
  return v;
}

WEFT_DEV void ll128Store(void* p, const Pack16& v, bool /*flag*/, bool active) {
  uint64_t a = ((uint64_t)v.w[1] << 32) | v.w[0], b = ((uint64_t)v.w[3] << 32) | v.w[2];
  asm volatile(
      "{ .reg .pred on; setp.ne.u32 on, %3, 0;\n"
      "@on st.volatile.global.v2.u64 [%0], {%1,%2}; }" ::"l"(p),
      "l"(a), "l"(b), "r"((uint32_t)active)
      : "memory");
}

// ---- synchronization variables (counters, flags) ------------------------------------------

WEFT_DEV uint64_t ldRelaxedSys(const volatile uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

WEFT_DEV uint64_t ldAcquireSys(const volatile uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

WEFT_DEV uint32_t ldRelaxedSys(const volatile uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

WEFT_DEV void stRelaxedSys(volatile uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

WEFT_DEV void stReleaseSys(volatile uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

WEFT_DEV void stReleaseSys(volatile uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Makes every write this thread has observed (its own, and other threads' writes ordered before
// it by a barrier or an acquire) visible system-wide before its later writes; also an acquire
// fence for its earlier loads.
WEFT_DEV void fenceAcqRelSys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
WEFT_DEV void fenceAcqRelGpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

WEFT_DEV uint32_t atomicAddAcqRelGpu(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

WEFT_DEV void stRelaxedGpu(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// ---- block shared memory ------------------------------------------------------------------

WEFT_DEV uint32_t sharedAddress(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

WEFT_DEV uint32_t ldAcquireCtaShared(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.cta.shared::cta.u32 %0, [%1];" : "=r"(v) : "r"(sharedAddress(p)) : "memory");
  return v;
}

WEFT_DEV uint32_t ldVolatileShared(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.volatile.shared::cta.u32 %0, [%1];" : "=r"(v) : "r"(sharedAddress(p)) : "memory");
  return v;
}

WEFT_DEV void stVolatileShared(uint32_t* p, uint32_t v) {
  asm volatile("st.volatile.shared::cta.u32 [%0], %1;" ::"r"(sharedAddress(p)), "r"(v) : "memory");
}

// Adds v with release semantics at block scope: the caller's earlier accesses (and those of its
// warp, after a syncWarp) are ordered before the addition.
WEFT_DEV void redAddReleaseCtaShared(uint32_t* p, uint32_t v) {
  asm volatile("red.release.cta.shared::cta.add.u32 [%0], %1;" ::"r"(sharedAddress(p)), "r"(v) : "memory");
}

// ---- barriers and warp collectives ---------------------------------------------------------

// Kernel-start set-up of block state the arch layer keeps (nothing on NVIDIA: named barriers are
// hardware). Every thread calls it before the kernel's first syncBlock().
WEFT_DEV void initBlock() {}

// Programmatic dependent launch (sm_90): a kernel launched with it may start while the previous
// kernel of its stream still runs. waitPreviousGrid() returns once that kernel has completed and
// its memory is visible; allowNextGrid() lets the stream's next such kernel start. No-ops for a
// kernel launched without it, and before sm_90.
WEFT_DEV void waitPreviousGrid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
WEFT_DEV void allowNextGrid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

WEFT_DEV void syncBlock() { __syncthreads(); }
WEFT_DEV void syncWarp() { __syncwarp(); }

// Named barrier `id` over nThreads threads (a multiple of the warp size); whole warps call these.
// barSync waits for the barrier; barArrive counts the caller in without waiting.
WEFT_DEV void barSync(int id, int nThreads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nThreads) : "memory");
}
WEFT_DEV void barArrive(int id, int nThreads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(nThreads) : "memory");
}

WEFT_DEV uint32_t shflIdx(uint32_t v, int srcLane) { return __shfl_sync(0xffffffffu, v, srcLane); }
WEFT_DEV uint64_t shflIdx(uint64_t v, int srcLane) {
  uint32_t lo = __shfl_sync(0xffffffffu, (uint32_t)v, srcLane);
  uint32_t hi = __shfl_sync(0xffffffffu, (uint32_t)(v >> 32), srcLane);
  return ((uint64_t)hi << 32) | lo;
}
WEFT_DEV bool anyLane(bool v) { return __any_sync(0xffffffffu, v); }
WEFT_DEV LaneMask ballot(bool v) { return __ballot_sync(0xffffffffu, v); }

// ---- time ---------------------------------------------------------------------------------

WEFT_DEV uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
WEFT_DEV uint64_t clockCycles() { return clock64(); }

WEFT_DEV void trap() { __trap(); }

}  // namespace weft::dev::arch
