// A device-to-device copy as a kernel, for a one-rank communicator's copies captured in a CUDA
// graph: there a cudaMemcpyAsync becomes a memcpy node, which ran a 1 GiB copy in 775 us on an
// H200 against 503 us for the same call on a stream (session 21; NCCL's sendrecv kernel: 570).
#include <cstdint>

#include "device/kernel_api.h"

namespace weft::dev {
namespace {

constexpr int kLocalCopyThreads = 512;
constexpr int kLocalCopyUnroll = 4;  // 16-byte words in flight per thread

// `words` 16-byte words from src to dst (both 16-byte aligned), grid-strided, then the tail's
// `tailBytes` (< 16) by the first threads of block 0.
__global__ void __launch_bounds__(kLocalCopyThreads) weftLocalCopy(uint4* dst, const uint4* src, uint64_t words,
                                                                  char* dstTail, const char* srcTail, int tailBytes) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (kLocalCopyUnroll - 1) * stride < words; i += kLocalCopyUnroll * stride) {
    uint4 v[kLocalCopyUnroll];
#pragma unroll
    for (int u = 0; u < kLocalCopyUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kLocalCopyUnroll; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < words; i += stride) dst[i] = src[i];
  if (blockIdx.x == 0 && (int)threadIdx.x < tailBytes) dstTail[threadIdx.x] = srcTail[threadIdx.x];
}

}  // namespace

const void* localCopyKernel() { return reinterpret_cast<const void*>(&weftLocalCopy); }

int localCopyThreads() { return kLocalCopyThreads; }

}  // namespace weft::dev
