// AMD (HIP, gfx90a / gfx94x) implementation of the arch layer: the same functions as cuda.cuh,
// with each memory-ordering primitive mapped to the AMDGPU memory model's nearest equivalent
// (clang's __hip_atomic_* builtins and __builtin_amdgcn_fence, whose scopes are "wavefront",
// "workgroup", "agent" = one GPU, and "" = system). Compiled for hardware we have never run on:
// see the README's "HIP / ROCm" section.
//
// Cache facts the mapping relies on (gfx90a/gfx940): each CU has a write-through vector L1 that
// is not coherent with other CUs or GPUs; loads marked GLC (gfx90a) or SC0/SC1 (gfx940) bypass
// it. Volatile accesses get those bits, which is what NVIDIA's ld.volatile gives in cuda.cuh.
// Memory shared between GPUs is allocated fine-grained (runtime/shareable_alloc.cc), so
// system-scope atomics and fences reach the peer.
#pragma once

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime.h>

#include <cstdint>
#include <cstring>

#include "device/arch/hip_types.h"

#define WEFT_DEV __device__ __forceinline__
#define WEFT_DEV_NOINLINE __device__ __noinline__
// ROCm 5.2 has no __grid_constant__; AMD kernel arguments are read from memory anyway.
#define WEFT_GRID_CONSTANT
#define WEFT_UNROLL _Pragma("unroll")

namespace weft::dev::arch {

// A wavefront has 64 lanes on CDNA (gfx9); every lane mask is 64 bits wide.
constexpr int kWarpSize = 64;
using LaneMask = uint64_t;
constexpr int kMaxBlockThreads = 1024;
constexpr int kDefaultBlockThreads = 512;  // 8 wavefronts: 7 data + 1 sync in the Simple protocol
// AMD has one hardware barrier per workgroup (s_barrier, all waves); the named barriers below
// are software barriers in LDS, as many as the protocols need.
constexpr int kNamedBarriers = 16;
// LL128 relies on a warp's 128-byte store reaching the peer whole, flag word included. Nothing
// documents that for AMD's fabric (and a 64-lane wave stores 256 bytes per instruction), so LL128
// is off here: dev::isSupported answers false for it.
constexpr bool kLL128Safe = false;

struct alignas(16) Pack16 {
  uint32_t w[4];
};

WEFT_DEV int threadId() { return (int)threadIdx.x; }
WEFT_DEV int laneId() { return (int)(threadIdx.x & (kWarpSize - 1)); }
WEFT_DEV int warpId() { return (int)(threadIdx.x / kWarpSize); }

template <typename To, typename From>
WEFT_DEV To bitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bitCast needs equal sizes");
  To to;
  memcpy(static_cast<void*>(&to), &from, sizeof(To));
  return to;
}

// ---- data path: plain-memory loads and stores ---------------------------------------------

typedef uint32_t U32x4 __attribute__((ext_vector_type(4)));

// One 16-byte load (global_load_dwordx4). Volatile: the compiler keeps it, and the backend marks it
// to bypass the CU's L1 (GLC / SC0 SC1), because peers write connection buffers and other CUs
// may have written user buffers since this CU last read them.
WEFT_DEV Pack16 ld16(const void* p) {
  U32x4 v = *static_cast<const volatile U32x4*>(p);
  Pack16 r;
  r.w[0] = v.x;
  r.w[1] = v.y;
  r.w[2] = v.z;
  r.w[3] = v.w;
  return r;
}

// Plain 16-byte store: stores write through the L1 to the L2 (or over the fabric to the peer's
// memory); ordering comes from the fences and releases below, as on NVIDIA.
WEFT_DEV void st16(void* p, const Pack16& v) {
  U32x4 x = {v.w[0], v.w[1], v.w[2], v.w[3]};
  *static_cast<U32x4*>(p) = x;
}

// LL lines: a 16-byte line {data, flag, data, flag} must travel in ONE access on both ends, so
// a reader that sees both flags also sees both data words. global_load/store_dwordx4 are single
// 16-byte accesses on CDNA; volatile keeps them from being split or merged and bypasses the L1.
// LL128 is not offered on AMD (no WEFT_ARCH_HAS_LL128): its whole-128-byte-line guarantee is an
// NVLink property not shown for Infinity Fabric.
WEFT_DEV Pack16 ldLine16(const void* p) { return ld16(p); }
WEFT_DEV void stLine16(void* p, const Pack16& v) {
  U32x4 x = {v.w[0], v.w[1], v.w[2], v.w[3]};
  *static_cast<volatile U32x4*>(p) = x;
}

template <int Bytes>
struct UintOfBytes;
template <> struct UintOfBytes<1> { using T = uint8_t; };
template <> struct UintOfBytes<2> { using T = uint16_t; };
template <> struct UintOfBytes<4> { using T = uint32_t; };
template <> struct UintOfBytes<8> { using T = uint64_t; };

// Loads/stores of 1, 2, 4 or 8 bytes, returned zero-extended in a uint64_t; volatile loads for the
// same reason as ld16.
template <int Bytes>
WEFT_DEV uint64_t ldN(const void* p) {
  static_assert(Bytes == 1 || Bytes == 2 || Bytes == 4 || Bytes == 8, "unsupported width");
  using T = typename UintOfBytes<Bytes>::T;
  return (uint64_t)*static_cast<const volatile T*>(p);
}

template <int Bytes>
WEFT_DEV void stN(void* p, uint64_t v) {
  static_assert(Bytes == 1 || Bytes == 2 || Bytes == 4 || Bytes == 8, "unsupported width");
  using T = typename UintOfBytes<Bytes>::T;
  *static_cast<T*>(p) = (T)v;
}

// ---- synchronization variables (counters, flags) ------------------------------------------
// The const_casts drop `volatile`: the atomic builtins give the access its semantics.

template <typename T>
WEFT_DEV T* unv(const volatile T* p) {
  return const_cast<T*>(p);
}

// ld.relaxed.sys: an atomic load at system scope (bypasses the L1, never torn, no ordering).
WEFT_DEV uint64_t ldRelaxedSys(const volatile uint64_t* p) {
  return __hip_atomic_load(unv(p), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
WEFT_DEV uint32_t ldRelaxedSys(const volatile uint32_t* p) {
  return __hip_atomic_load(unv(p), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}

// ld.acquire.sys: the load, then an L1 invalidate (buffer_wbinvl1_vol / buffer_inv sc1) and a
// wait, so that later loads of this CU see what the peer wrote before its release. Spins on it
// back off with s_sleep (about 64 clocks per unit) so the CU's other waves keep issuing.
WEFT_DEV uint64_t ldAcquireSys(const volatile uint64_t* p) {
  uint64_t v = __hip_atomic_load(unv(p), __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
  __builtin_amdgcn_s_sleep(1);
  return v;
}

// st.relaxed.sys: atomic store at system scope.
WEFT_DEV void stRelaxedSys(volatile uint64_t* p, uint64_t v) {
  __hip_atomic_store(unv(p), v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}

// st.release.sys: waits for this wave's earlier accesses and writes back the L2 where it is not
// coherent with the system (buffer_wbl2 on gfx90a), then stores.
WEFT_DEV void stReleaseSys(volatile uint32_t* p, uint32_t v) {
  __hip_atomic_store(unv(p), v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
WEFT_DEV void stReleaseSys(volatile uint64_t* p, uint64_t v) {
  __hip_atomic_store(unv(p), v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}

// fence.acq_rel.sys: the system-scope fence (the acq_rel form of __threadfence_system, which is
// seq_cst): L2 write-back, wait for outstanding memory operations, L1 invalidate. Makes what this
// wave observed (including other waves' stores ordered before it by an LDS release/acquire)
// visible to peers before its later stores.
WEFT_DEV void fenceAcqRelSys() { __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, ""); }
// fence.acq_rel.gpu: the same at agent (one GPU) scope: no L2 write-back needed.
WEFT_DEV void fenceAcqRelGpu() { __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "agent"); }

// atom.acq_rel.gpu.add: atomic add in the L2 at agent scope.
WEFT_DEV uint32_t atomicAddAcqRelGpu(uint32_t* p, uint32_t v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_AGENT);
}

// st.relaxed.gpu: atomic store at agent scope.
WEFT_DEV void stRelaxedGpu(uint32_t* p, uint32_t v) {
  __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}

// ---- block shared memory (LDS) -------------------------------------------------------------
// LDS is one memory per CU, so workgroup scope needs no cache maintenance, only waits (lgkmcnt).

// ld.acquire.cta.shared: LDS load with workgroup-scope acquire.
WEFT_DEV uint32_t ldAcquireCtaShared(const uint32_t* p) {
  return __hip_atomic_load(const_cast<uint32_t*>(p), __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_WORKGROUP);
}
WEFT_DEV uint32_t ldVolatileShared(const uint32_t* p) { return *static_cast<const volatile uint32_t*>(p); }
WEFT_DEV void stVolatileShared(uint32_t* p, uint32_t v) { *static_cast<volatile uint32_t*>(p) = v; }

// red.release.cta.shared.add: LDS atomic add with release. The memory counters a release waits on
// (vmcnt/lgkmcnt) count the whole wave's accesses, so a release by lane 0 after syncWarp() covers
// every lane's earlier stores. Stronger than NVIDIA's: a workgroup-scope release need not wait for
// global stores at all (one CU, write-through L1), but the Simple protocol's sync wave then issues
// a system-scope fence that can only wait for its own wave's stores, not for these (possibly
// still crossing the fabric to a peer). So the fence before the add is at agent scope, which waits
// until this wave's stores have completed; the sync wave's system fence does the rest.
WEFT_DEV void redAddReleaseCtaShared(uint32_t* p, uint32_t v) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
  (void)__hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
}

// ---- barriers and wave collectives ---------------------------------------------------------

WEFT_DEV void syncBlock() { __syncthreads(); }

// __syncwarp: a wave runs its lanes in lock step and reconverges after divergent branches, so
// there is nothing to wait for; the wave barrier stops the compiler from moving code across, and
// the workgroup fence orders the lanes' memory accesses (LDS and global) as __syncwarp does.
WEFT_DEV void syncWarp() {
  __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "workgroup");
  __builtin_amdgcn_wave_barrier();
}

// Named barriers (NVIDIA's bar.sync/bar.arrive id, nThreads). AMD has only s_barrier, which waits
// for every wave of the workgroup, while the Simple protocol synchronises subsets of waves (a sync
// wave with its data waves) and lets the sync wave arrive without waiting. So each id is a
// software barrier in LDS: a count of arrived waves and a generation number. Lane 0 of each wave
// counts the wave in; the wave that completes the count resets it and bumps the generation
// (release); waiting waves spin (acquire, with s_sleep) until the generation moves past the value
// they read before arriving. That value cannot be stale: the barrier cannot complete before the
// reader's own arrival. As with the hardware barrier, every arrival of one phase of an id must
// come before any arrival of its next phase (the Simple protocol guarantees it: a depth slot is
// only re-released after all data waves finished its previous slice). The state must be zeroed
// at kernel start: initBlock().
struct NamedBarrierState {
  uint32_t arrived[kNamedBarriers];
  uint32_t generation[kNamedBarriers];
};
WEFT_DEV NamedBarrierState& namedBarriers() {
  __shared__ NamedBarrierState state;
  return state;
}

// No programmatic dependent launch on AMD: the launch is always ordered after the previous kernel.
WEFT_DEV void waitPreviousGrid() {}
WEFT_DEV void allowNextGrid() {}

// Called by every thread at kernel start, before the first syncBlock().
WEFT_DEV void initBlock() {
  NamedBarrierState& s = namedBarriers();
  for (int i = threadId(); i < kNamedBarriers; i += (int)blockDim.x) {
    s.arrived[i] = 0;
    s.generation[i] = 0;
  }
}

namespace detail {
// Lane 0: counts this wave in; true when it completed the barrier (and released the waiters).
WEFT_DEV bool barrierArrive(NamedBarrierState& s, int id, int nThreads) {
  const uint32_t nWaves = (uint32_t)(nThreads / kWarpSize);
  uint32_t before = __hip_atomic_fetch_add(&s.arrived[id], 1u, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_WORKGROUP);
  if (before + 1 != nWaves) return false;
  __hip_atomic_store(&s.arrived[id], 0u, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  (void)__hip_atomic_fetch_add(&s.generation[id], 1u, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_WORKGROUP);
  return true;
}
}  // namespace detail

// Whole waves call these; nThreads is a multiple of kWarpSize.
WEFT_DEV void barSync(int id, int nThreads) {
  NamedBarrierState& s = namedBarriers();
  if (laneId() == 0) {
    uint32_t gen = __hip_atomic_load(&s.generation[id], __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
    if (!detail::barrierArrive(s, id, nThreads)) {
      while (__hip_atomic_load(&s.generation[id], __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_WORKGROUP) == gen)
        __builtin_amdgcn_s_sleep(1);
    }
  }
  syncWarp();
}
WEFT_DEV void barArrive(int id, int nThreads) {
  syncWarp();  // every lane's earlier accesses are ordered before lane 0's release
  if (laneId() == 0) (void)detail::barrierArrive(namedBarriers(), id, nThreads);
}

// Shuffles read lane srcLane of the same wave (ds_bpermute).
WEFT_DEV uint32_t shflIdx(uint32_t v, int srcLane) { return (uint32_t)__shfl((int)v, srcLane, kWarpSize); }
WEFT_DEV uint64_t shflIdx(uint64_t v, int srcLane) {
  uint32_t lo = shflIdx((uint32_t)v, srcLane);
  uint32_t hi = shflIdx((uint32_t)(v >> 32), srcLane);
  return ((uint64_t)hi << 32) | lo;
}
// Bit i set when lane i's v is true (64-bit mask: one bit per lane of the wave).
WEFT_DEV LaneMask ballot(bool v) { return (LaneMask)__ballot(v); }
WEFT_DEV bool anyLane(bool v) { return ballot(v) != 0; }

// ---- time ---------------------------------------------------------------------------------

// Nanoseconds from the constant 100 MHz reference counter of gfx90a/gfx94x (s_memrealtime; the
// rate hipDeviceAttributeWallClockRate reports), so a resolution of 10 ns.
WEFT_DEV uint64_t globalTimerNs() {
#if defined(__HIP_DEVICE_COMPILE__)
  return __builtin_amdgcn_s_memrealtime() * 10ull;
#else
  return 0;  // host pass: never called
#endif
}
WEFT_DEV uint64_t clockCycles() { return clock64(); }

WEFT_DEV void trap() { __builtin_trap(); }

}  // namespace weft::dev::arch
