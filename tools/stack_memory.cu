// Device memory that raising the per-thread stack limit takes: weft's creation raises it to what
// its largest kernel needs (runtime::reserveStack; since session 11 they fit the 1024 B default
// unless LL128 is enabled). Standalone, on the GPU machine:
//   nvcc -O2 -arch=sm_90 -o /tmp/stack_memory tools/stack_memory.cu && /tmp/stack_memory
// H200 (session 10): 1024 -> 1232 B: 54 MiB, -> 1360 B: 86 MiB, -> 2152 B: 292 MiB.
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  cudaFree(0);  // creates the context
  size_t before = 0, after = 0, total = 0, limit = 0;
  if (cudaDeviceGetLimit(&limit, cudaLimitStackSize) != cudaSuccess) return 1;
  cudaMemGetInfo(&before, &total);
  for (size_t bytes : {1024, 1232, 1360, 2152}) {  // default; session 10's LL, LL128, Simple kernels
    if (cudaDeviceSetLimit(cudaLimitStackSize, bytes) != cudaSuccess) return 1;
    cudaMemGetInfo(&after, &total);
    std::printf("stack limit %zu -> %zu B per thread: %.1f MiB less free device memory\n", limit, bytes,
                (double)(before - after) / 1048576.0);
  }
  return 0;
}
