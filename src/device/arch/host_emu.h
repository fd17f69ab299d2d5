// A CPU stand-in for the arch layer, for host unit tests of the device code: memory accesses
// become memcpy or GCC atomics, SIMD intrinsics are emulated, and each GPU thread of a block is
// an OS thread (tests set the thread's index and block with EmuThread). Blocks are small here
// (kWarpSize 4, 32 threads) so that a CPU can run several ranks' blocks at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <vector>

#define WEFT_DEV inline
#define WEFT_DEV_NOINLINE __attribute__((noinline))
#define WEFT_GRID_CONSTANT
#define WEFT_UNROLL

namespace weft::dev::arch {

#ifndef WEFT_EMU_WARP_SIZE
#define WEFT_EMU_WARP_SIZE 4
#endif
#ifndef WEFT_EMU_BLOCK_THREADS
#define WEFT_EMU_BLOCK_THREADS 32
#endif
constexpr int kWarpSize = WEFT_EMU_WARP_SIZE;
using LaneMask = uint32_t;
constexpr int kMaxBlockThreads = 1024;
constexpr int kDefaultBlockThreads = WEFT_EMU_BLOCK_THREADS;
constexpr int kNamedBarriers = 16;
constexpr bool kLL128Safe = true;

// A barrier that counts arriving threads, as the hardware's named barriers do.
struct EmuBarrier {
  std::mutex m;
  std::condition_variable cv;
  int count = 0;
  uint64_t generation = 0;
  uint64_t tag = 0;
  int tagSite = 0;
  void arrive(int n, bool wait, uint64_t myTag = 0, int site = 0) {
    std::unique_lock<std::mutex> lk(m);
    uint64_t g = generation;
    if (myTag) {
      if (count == 0) { tag = myTag; tagSite = site; }
      else if (tag != myTag) {
        // The GPU would run a warp-collective with lanes at different calls: undefined there.
        std::fprintf(stderr, "emulated warp: lanes at different warp syncs (call %lu at line %d, call %lu at line %d)\n",
                     (unsigned long)myTag, site, (unsigned long)tag, tagSite);
        std::abort();
      }
    }
    if (++count == n) {
      count = 0;
      generation++;
      cv.notify_all();
      return;
    }
    if (wait) cv.wait(lk, [&] { return generation != g; });
  }
};

struct EmuBlock {
  explicit EmuBlock(int nThreads) : nThreads(nThreads), warps(nThreads / kWarpSize), votes(nThreads, 0) {}
  int nThreads;
  EmuBarrier block;
  EmuBarrier named[kNamedBarriers];
  std::vector<EmuBarrier> warps;
  std::vector<int> votes;  // per thread: anyLane's exchange slot
};

struct EmuThreadState {
  unsigned x = 0;
  EmuBlock* block = nullptr;
  uint64_t warpSyncs = 0;  // warp-collective calls so far: every lane of a warp must agree
};
inline thread_local EmuThreadState threadIdx;

inline int threadId() { return (int)threadIdx.x; }
inline int laneId() { return (int)threadIdx.x & (kWarpSize - 1); }
inline int warpId() { return (int)threadIdx.x / kWarpSize; }
inline void initBlock() {}
inline void waitPreviousGrid() {}
inline void allowNextGrid() {}
inline void syncWarp(int site = __builtin_LINE()) {
  threadIdx.warpSyncs++;
  threadIdx.block->warps[warpId()].arrive(kWarpSize, true, threadIdx.warpSyncs, site);
}
inline void syncBlock() { threadIdx.block->block.arrive(threadIdx.block->nThreads, true); }
inline void barSync(int id, int n) { threadIdx.block->named[id].arrive(n, true); }
inline void barArrive(int id, int n) { threadIdx.block->named[id].arrive(n, false); }

template <typename T>
inline T* unv(volatile T* p) { return const_cast<T*>(p); }
template <typename T>
inline T* unv(const volatile T* p) { return const_cast<T*>(p); }

// Spin loops poll through the loads marked "poll" below. A thread that keeps polling without
// storing anything is waiting for another one: after kPollsBeforeSleep polls in a row it sleeps a
// little at each poll instead of yielding. Blocks are hundreds of OS threads; if the waiting ones
// stayed runnable, on a loaded 2-core machine they would take most of the CPU from the few that
// have work, and a test that takes a second alone could take minutes. Every store ends the streak.
constexpr int kPollsBeforeSleep = 64;
inline thread_local int pollStreak = 0;
inline void pollPause() {
  if (++pollStreak < kPollsBeforeSleep) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}
inline void stored() { pollStreak = 0; }

inline uint64_t ldAcquireSys(const volatile uint64_t* p) {  // poll
  pollPause();
  return __atomic_load_n(unv(p), __ATOMIC_ACQUIRE);
}
inline uint64_t ldRelaxedSys(const volatile uint64_t* p) {  // poll
  pollPause();
  return __atomic_load_n(unv(p), __ATOMIC_RELAXED);
}
inline uint32_t ldRelaxedSys(const volatile uint32_t* p) { return __atomic_load_n(unv(p), __ATOMIC_RELAXED); }
inline void stRelaxedSys(volatile uint64_t* p, uint64_t v) {
  stored();
  __atomic_store_n(unv(p), v, __ATOMIC_RELAXED);
}
inline void stReleaseSys(volatile uint32_t* p, uint32_t v) {
  stored();
  __atomic_store_n(unv(p), v, __ATOMIC_RELEASE);
}
inline void stReleaseSys(volatile uint64_t* p, uint64_t v) {
  stored();
  __atomic_store_n(unv(p), v, __ATOMIC_RELEASE);
}
inline void fenceAcqRelSys() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void fenceAcqRelGpu() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline uint32_t atomicAddAcqRelGpu(uint32_t* p, uint32_t v) {
  stored();
  return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
inline void stRelaxedGpu(uint32_t* p, uint32_t v) {
  stored();
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
inline uint64_t globalTimerNs() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline uint32_t ldAcquireCtaShared(const uint32_t* p) {  // poll
  pollPause();
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
inline uint32_t ldVolatileShared(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline void stVolatileShared(uint32_t* p, uint32_t v) {
  stored();
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
inline void redAddReleaseCtaShared(uint32_t* p, uint32_t v) {
  stored();
  __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
}

struct alignas(16) Pack16 {
  uint32_t w[4];
};

template <typename To, typename From>
inline To bitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bitCast needs equal sizes");
  To to;
  std::memcpy(static_cast<void*>(&to), &from, sizeof(To));
  return to;
}

inline Pack16 ld16(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16) std::abort();  // the GPU would fault
  Pack16 v;
  std::memcpy(&v, p, 16);
  return v;
}
inline void st16(void* p, const Pack16& v) {
  if (reinterpret_cast<uintptr_t>(p) % 16) std::abort();
  stored();
  std::memcpy(p, &v, 16);
}
template <int Bytes>
inline uint64_t ldN(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % Bytes) std::abort();
  uint64_t v = 0;
  std::memcpy(&v, p, Bytes);
  return v;
}
template <int Bytes>
inline void stN(void* p, uint64_t v) {
  if (reinterpret_cast<uintptr_t>(p) % Bytes) std::abort();
  stored();
  std::memcpy(p, &v, Bytes);
}
inline void trap() { std::abort(); }

// Warp vote: every lane of the warp calls it.
inline bool anyLane(bool v) {
  std::vector<int>& votes = threadIdx.block->votes;
  votes[threadId()] = v ? 1 : 0;
  syncWarp();
  bool any = false;
  for (int l = 0; l < kWarpSize; l++) any = any || votes[warpId() * kWarpSize + l] != 0;
  syncWarp();
  return any;
}

// ---- flag-carrying lines (see cuda.cuh) ----
// A 16-byte LL line must be read and written whole: a striped lock per address stands in for the
// GPU's single 16-byte access.
#define WEFT_ARCH_HAS_LL128 1
inline std::mutex& lineLock(const void* p) {
  static std::mutex locks[64];
  return locks[(reinterpret_cast<uintptr_t>(p) >> 4) % 64];
}
inline Pack16 ldLine16(const void* p) {  // poll
  pollPause();
  std::lock_guard<std::mutex> lk(lineLock(p));
  return ld16(p);
}
inline void stLine16(void* p, const Pack16& v) {
  stored();
  std::lock_guard<std::mutex> lk(lineLock(p));
  st16(p, v);
}
// LL128: stores: the data parts of the warp's slot, then (after the warp syncs) the flag part with
// release. Loads model the GPU's weaker promise: one warp load may return a line's data parts
// older than its flag part (its sectors are served at different times), so the data parts are
// read first and the flag part, with acquire, last; only a load after the flag was seen returns
// the whole line (callers reload, as on the GPU). Emulated warps are 4 lanes, so a line spans two
// slots: callers store slots in ascending and load them in descending order, which keeps a line's
// flag part last on store and first on load.
inline Pack16 ll128Load(const void* p, bool flag, bool active) {  // poll (the flag part)
  Pack16 v{};
  const char* c = static_cast<const char*>(p);
  if (active && !flag) std::memcpy(&v, c, 16);
  syncWarp();
  if (active && flag) {
    pollPause();
    uint64_t f = __atomic_load_n(reinterpret_cast<const uint64_t*>(c + 8), __ATOMIC_ACQUIRE);
    std::memcpy(&v.w[2], &f, 8);
    std::memcpy(&v.w[0], c, 8);
  }
  return v;
}
inline void ll128Store(void* p, const Pack16& v, bool flag, bool active) {
  char* c = static_cast<char*>(p);
  stored();
  if (active && !flag) std::memcpy(c, &v, 16);
  syncWarp();
  if (active && flag) {
    std::memcpy(c, &v.w[0], 8);
    uint64_t f;
    std::memcpy(&f, &v.w[2], 8);
    __atomic_store_n(reinterpret_cast<uint64_t*>(c + 8), f, __ATOMIC_RELEASE);
  }
}

}  // namespace weft::dev::arch

// Byte-wise SIMD of the CUDA video instructions.
namespace weft::dev::emu {
template <typename F>
inline unsigned bytewise(unsigned a, unsigned b, F f) {
  unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)(uint8_t)f((a >> (8 * i)) & 0xff, (b >> (8 * i)) & 0xff) << (8 * i);
  return r;
}
}  // namespace weft::dev::emu
inline unsigned __vadd4(unsigned a, unsigned b) { return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return x + y; }); }
inline unsigned __vminu4(unsigned a, unsigned b) { return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return x < y ? x : y; }); }
inline unsigned __vmaxu4(unsigned a, unsigned b) { return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return x < y ? y : x; }); }
inline unsigned __vmins4(unsigned a, unsigned b) {
  return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return (int8_t)x < (int8_t)y ? x : y; });
}
inline unsigned __vmaxs4(unsigned a, unsigned b) {
  return weft::dev::emu::bytewise(a, b, [](unsigned x, unsigned y) { return (int8_t)x < (int8_t)y ? y : x; });
}
// fma of half/bfloat16 is device-only in the CUDA headers; through double it rounds once.
inline __half __hfma(__half a, __half b, __half c) {
  return __double2half((double)__half2float(a) * __half2float(b) + __half2float(c));
}
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __halves2half2(__hfma(__low2half(a), __low2half(b), __low2half(c)), __hfma(__high2half(a), __high2half(b), __high2half(c)));
}
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __double2bfloat16((double)__bfloat162float(a) * __bfloat162float(b) + __bfloat162float(c));
}
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return __halves2bfloat162(__hfma(__low2bfloat16(a), __low2bfloat16(b), __low2bfloat16(c)),
                            __hfma(__high2bfloat16(a), __high2bfloat16(b), __high2bfloat16(c)));
}
