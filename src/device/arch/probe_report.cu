// The launch timeline probe's storage and its report (arch/probe.cuh): here, in the arch layer,
// because reading device symbols is a CUDA runtime call. Without WEFT_DEVICE_PROBE (and on AMD)
// the report is nothing.
#include "device/arch/probe.cuh"
#include "device/kernel_api.h"

#include <cstdio>

namespace weft::dev {

#if defined(WEFT_DEVICE_PROBE) && defined(__CUDACC__)
__device__ unsigned long long weftProbeCycles[kProbePoints];
__device__ unsigned long long weftProbeHits[kProbePoints];

void reportDeviceProbe(int rank) {
  unsigned long long cycles[kProbePoints] = {}, hits[kProbePoints] = {};
  if (cudaMemcpyFromSymbol(cycles, weftProbeCycles, sizeof(cycles)) != cudaSuccess ||
      cudaMemcpyFromSymbol(hits, weftProbeHits, sizeof(hits)) != cudaSuccess)
    return;
  if (hits[kProbeStart] == 0) return;
  std::fprintf(stderr, "weft probe (rank %d destroys): %llu launches; mean cycles since kernel start:", rank,
               hits[kProbeStart]);
  for (int p = 1; p < kProbePoints; p++)
    if (hits[p] != 0) std::fprintf(stderr, " p%d=%.0f(%llu)", p, (double)cycles[p] / (double)hits[p], hits[p]);
  std::fprintf(stderr, "\n");
  const unsigned long long zeros[kProbePoints] = {};
  (void)cudaMemcpyToSymbol(weftProbeCycles, zeros, sizeof(zeros));
  (void)cudaMemcpyToSymbol(weftProbeHits, zeros, sizeof(zeros));
}
#else
void reportDeviceProbe(int) {}
#endif

}  // namespace weft::dev
