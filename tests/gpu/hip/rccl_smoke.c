/* RCCL smoke test for the HIP build (librccl.so.1), written against <rccl/rccl.h> as a ROCm program
 * would be. One process drives every visible AMD GPU (ncclCommInitAll) and checks:
 *   - ncclAllReduce (float sum) and ncclAllToAll give the exact expected values;
 *   - ncclAllToAllv with uneven counts and displacements puts every block where it belongs;
 *   - ncclAllToAllv rejects in-place use, ncclAllReduceWithBias answers ncclInvalidUsage, and
 *     ncclGetLastError then names it.
 * CI only compiles it (no AMD GPU there); with no GPU it says so and exits 2.
 * Run: build-hip/tests/gpu/weft_rccl_smoke */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hip/hip_runtime.h>
#include <rccl/rccl.h>

#define MAX_GPUS 16
#define HIP_CHECK(call)                                                                   \
  do {                                                                                    \
    hipError_t e_ = (call);                                                               \
    if (e_ != hipSuccess) {                                                               \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, hipGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)
#define NCCL_CHECK(call)                                                                  \
  do {                                                                                    \
    ncclResult_t r_ = (call);                                                             \
    if (r_ != ncclSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static int failures = 0;
static void check(int ok, const char* what, int rank, size_t i, double got, double want) {
  if (ok) return;
  if (++failures <= 10) fprintf(stderr, "FAIL %s: rank %d element %zu: got %g, want %g\n", what, rank, i, got, want);
}

int main(void) {
  int n = 0;
  if (hipGetDeviceCount(&n) != hipSuccess || n == 0) {
    printf("no AMD GPU visible: nothing to run\n");
    return 2;
  }
  if (n > MAX_GPUS) n = MAX_GPUS;
  ncclComm_t comms[MAX_GPUS];
  hipStream_t streams[MAX_GPUS];
  float *send[MAX_GPUS], *recv[MAX_GPUS];
  const size_t count = 1 << 16;  /* elements per rank and peer block */
  NCCL_CHECK(ncclCommInitAll(comms, n, NULL));
  for (int r = 0; r < n; r++) {
    HIP_CHECK(hipSetDevice(r));
    HIP_CHECK(hipStreamCreate(&streams[r]));
    HIP_CHECK(hipMalloc((void**)&send[r], count * n * sizeof(float)));
    HIP_CHECK(hipMalloc((void**)&recv[r], count * n * sizeof(float)));
  }
  float* host = (float*)malloc(count * n * sizeof(float));

  /* AllReduce: rank r contributes r + 1 + i % 7 (small integers: the float sum is exact). */
  for (int r = 0; r < n; r++) {
    for (size_t i = 0; i < count; i++) host[i] = (float)(r + 1 + (int)(i % 7));
    HIP_CHECK(hipSetDevice(r));
    HIP_CHECK(hipMemcpy(send[r], host, count * sizeof(float), hipMemcpyHostToDevice));
  }
  NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < n; r++) NCCL_CHECK(ncclAllReduce(send[r], recv[r], count, ncclFloat, ncclSum, comms[r], streams[r]));
  NCCL_CHECK(ncclGroupEnd());
  for (int r = 0; r < n; r++) {
    HIP_CHECK(hipSetDevice(r));
    HIP_CHECK(hipStreamSynchronize(streams[r]));
    HIP_CHECK(hipMemcpy(host, recv[r], count * sizeof(float), hipMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++) {
      double want = n * (n + 1) / 2.0 + n * (double)(i % 7);
      check(host[i] == want, "allreduce", r, i, host[i], want);
    }
  }

  /* AllToAllv: rank r sends (p + 1) * 100 + r elements to rank p, packed back to back in
   * sendbuff; receivers place the block from rank q at q * count. Element k of the block from q
   * to p is q * 1e6 + p * 1e3 + k % 1000. */
  size_t sc[MAX_GPUS], sd[MAX_GPUS], rc[MAX_GPUS], rd[MAX_GPUS];
  for (int r = 0; r < n; r++) {
    size_t off = 0;
    for (int p = 0; p < n; p++) {
      size_t c = (size_t)(p + 1) * 100 + (size_t)r;
      for (size_t k = 0; k < c; k++) host[off + k] = (float)(r * 1e6 + p * 1e3 + (double)(k % 1000));
      off += c;
    }
    HIP_CHECK(hipSetDevice(r));
    HIP_CHECK(hipMemcpy(send[r], host, off * sizeof(float), hipMemcpyHostToDevice));
    HIP_CHECK(hipMemset(recv[r], 0, count * n * sizeof(float)));
  }
  NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    size_t off = 0;
    for (int p = 0; p < n; p++) {
      sc[p] = (size_t)(p + 1) * 100 + (size_t)r;
      sd[p] = off;
      off += sc[p];
      rc[p] = (size_t)(r + 1) * 100 + (size_t)p;
      rd[p] = (size_t)p * count;
    }
    NCCL_CHECK(ncclAllToAllv(send[r], sc, sd, recv[r], rc, rd, ncclFloat, comms[r], streams[r]));
  }
  NCCL_CHECK(ncclGroupEnd());
  for (int r = 0; r < n; r++) {
    HIP_CHECK(hipSetDevice(r));
    HIP_CHECK(hipStreamSynchronize(streams[r]));
    HIP_CHECK(hipMemcpy(host, recv[r], count * n * sizeof(float), hipMemcpyDeviceToHost));
    for (int q = 0; q < n; q++) {
      size_t c = (size_t)(r + 1) * 100 + (size_t)q;
      for (size_t k = 0; k < c; k++) {
        double want = q * 1e6 + r * 1e3 + (double)(k % 1000);
        check(host[q * count + k] == (float)want, "alltoallv", r, q * count + k, host[q * count + k], want);
      }
      check(host[q * count + c] == 0.0f, "alltoallv wrote past its block", r, q * count + c, host[q * count + c], 0);
    }
  }

  /* Argument checks and the unsupported calls. */
  check(ncclAllToAllv(send[0], sc, sd, send[0], rc, rd, ncclFloat, comms[0], streams[0]) == ncclInvalidArgument,
        "in-place alltoallv is rejected", 0, 0, 0, ncclInvalidArgument);
  check(ncclAllReduceWithBias(send[0], recv[0], count, ncclFloat, ncclSum, comms[0], streams[0], recv[0]) ==
            ncclInvalidUsage, "ncclAllReduceWithBias answers ncclInvalidUsage", 0, 0, 0, ncclInvalidUsage);
  check(strstr(ncclGetLastError(NULL), "ncclAllReduceWithBias") != NULL, "ncclGetLastError names the call", 0, 0, 0, 0);

  for (int r = 0; r < n; r++) NCCL_CHECK(ncclCommDestroy(comms[r]));
  free(host);
  printf("%s on %d GPU(s): %d failures\n", failures ? "FAILED" : "passed", n, failures);
  return failures ? 1 : 0;
}
