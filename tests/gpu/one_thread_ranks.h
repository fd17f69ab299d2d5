// Ranks of one communicator driven by one thread (ncclCommInitRank in a group), each with its own
// non-blocking stream; rank r on GPU r % gpus. Ranks sharing a GPU need weft's
// NCCL_WEFT_ALLOW_GPU_SHARING=1 (NCCL refuses them). Shared by the misuse and register tests.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "nccl.h"

#define CUDA_OK(x)                                                                       \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(3);                                                                           \
    }                                                                                    \
  } while (0)

struct Rank {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
};

// Makes ranks.size() ranks on `gpus` GPUs; false (the reason printed) when creation failed.
inline bool makeOneThreadRanks(std::vector<Rank>& ranks, int gpus) {
  const int n = (int)ranks.size();
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return false;
  // Several ncclCommInitRank in one group: ranks may share a GPU (ncclCommInitAll refuses that).
  ncclResult_t init = ncclGroupStart();
  for (int r = 0; r < n; ++r) {
    ranks[r].device = r % gpus;
    CUDA_OK(cudaSetDevice(ranks[r].device));
    if (init == ncclSuccess) init = ncclCommInitRank(&ranks[r].comm, n, id, r);
  }
  ncclResult_t end = ncclGroupEnd();
  if (init != ncclSuccess || end != ncclSuccess) {
    fprintf(stderr, "communicator creation failed: %s\n", ncclGetLastError(nullptr));
    return false;
  }
  for (Rank& r : ranks) {
    CUDA_OK(cudaSetDevice(r.device));
    CUDA_OK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  }
  return true;
}
