// Diagnostic for the open kernel fault (docs/NOTES.md): creates a 1-rank communicator through the
// public API, then checks from the host and from a one-thread kernel that the communicator's device
// state is readable, and finally runs one AllReduce.
#include <cstdio>

#include "core/communicator.h"
#include "nccl.h"

namespace {

__global__ void readDevComm(const weft::dev::DevComm* comm, int* out) {
  out[0] = comm->rank;
  out[1] = comm->nRanks;
  out[2] = comm->nChannels;
  out[3] = comm->channels[0].ring.index;
  out[4] = comm->channels[0].ring.next;
}

int check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}

}  // namespace

int main() {
  cudaSetDevice(0);
  ncclComm_t comm;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    std::printf("FAIL init: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  cudaPointerAttributes attr{};
  int bad = check(cudaPointerGetAttributes(&attr, comm->devComm), "cudaPointerGetAttributes(devComm)");
  std::printf("devComm %p type %d device %d devicePointer %p\n", (void*)comm->devComm, (int)attr.type, attr.device,
              attr.devicePointer);
  int* out = nullptr;
  bad |= check(cudaMallocManaged(&out, 5 * sizeof(int)), "cudaMallocManaged");
  readDevComm<<<1, 1>>>(comm->devComm, out);
  bad |= check(cudaDeviceSynchronize(), "readDevComm");
  if (!bad) std::printf("readDevComm: rank %d nRanks %d nChannels %d ring.index %d next %d\n", out[0], out[1], out[2], out[3], out[4]);
  float* buf = nullptr;
  bad |= check(cudaMalloc(&buf, 1024 * sizeof(float)), "cudaMalloc");
  ncclResult_t r = ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, 0);
  std::printf("ncclAllReduce returned %d\n", (int)r);
  bad |= check(cudaDeviceSynchronize(), "AllReduce kernel");
  std::printf("%s\n", bad ? "PROBE FAILED" : "PROBE PASSED");
  return bad;
}
