// Developer-only timeline probe of a launch (CMake -DWEFT_DEVICE_PROBE=ON; off, every probe is
// nothing). Thread 0 of block 0 notes the SM clock (clock64) in shared memory at each point it
// passes (the last pass counts); at the kernel's end it adds each point's cycles since the start
// to a global sum, and reportDeviceProbe() prints the means at communicator destruction. A point
// costs a shared-memory store, so the timeline up to kProbeItemsDone is close to an unprobed
// launch's; the atomics after it still add 1-3 us to each launch's total (session 14), so time
// launches with a normal build.
#pragma once

#include "device/arch/arch.cuh"

namespace weft::dev {

enum ProbePoint : int {
  kProbeStart = 0,      // kernel entry
  kProbeWorksCopied,    // items in shared memory
  kProbeGridWaited,     // after the PDL wait for the previous launch
  kProbeItemStart,      // before the first item runs
  kProbeLinksReady,     // the algorithm's connection state loaded (prims/links constructor)
  kProbeSendReady,      // the slots to write are free (waitSend)
  kProbeWritten,        // the thread's packs written to the peer(s)
  kProbeReceived,       // the thread's packs from the peer(s) arrived and were used
  kProbeStepDone,       // the step's slots freed for the peer(s) (head published)
  kProbeItemsDone,      // every item run
  // Simple (thread 0 is a data thread there; the sync warp's lane 0 notes its own points):
  kProbeSyncLinksReady,  // the sync warp's connection state loaded
  kProbeSliceReady0,     // the sync warp released slice 0 to the data warps (its waits done)
  kProbeSliceReady1,     // ... slice 1
  kProbeDataReleased0,   // thread 0 past the barrier of slice 0
  kProbeDataReleased1,   // ... slice 1
  kProbePublished0,      // the sync warp posted slice 0 (fence and counter store issued)
  kProbePublished1,      // ... slice 1
  kProbePoints = 24,
};

#if defined(WEFT_DEVICE_PROBE) && defined(__CUDACC__)
extern __device__ unsigned long long weftProbeCycles[kProbePoints];
extern __device__ unsigned long long weftProbeHits[kProbePoints];

WEFT_DEV unsigned long long* probeClocks() {
  __shared__ unsigned long long clocks[kProbePoints];
  return clocks;
}

// A point noted by another thread than thread 0: `chosen` says the caller is that thread.
WEFT_DEV void probeBy(ProbePoint point, bool chosen) {
  if (chosen && blockIdx.x == 0) probeClocks()[point] = (unsigned long long)clock64();
}

WEFT_DEV void probe(ProbePoint point) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  unsigned long long* clocks = probeClocks();
  if (point == kProbeStart)
    for (int p = 1; p < kProbePoints; p++) clocks[p] = 0;
  clocks[point] = (unsigned long long)clock64();
  if (point != kProbeItemsDone) return;
  for (int p = 1; p < kProbePoints; p++) {
    if (clocks[p] == 0) continue;
    atomicAdd(&weftProbeCycles[p], clocks[p] - clocks[kProbeStart]);
    atomicAdd(&weftProbeHits[p], 1ull);
  }
  atomicAdd(&weftProbeHits[kProbeStart], 1ull);
}
#else
WEFT_DEV void probe(ProbePoint) {}
WEFT_DEV void probeBy(ProbePoint, bool) {}
#endif

}  // namespace weft::dev
