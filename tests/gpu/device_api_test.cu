// NCCL's device API on weft's windows: a kernel compiled against NCCL 2.28.9's own nccl_device.h,
// as a client's kernel is, given window handles from weft's ncclCommWindowRegister.
//   flat       every rank registers an ncclMemAlloc buffer (all ranks at once: a group for the
//              ranks a thread drives)
//   local      the kernel reads its own buffer's values through ncclGetLocalPointer
//   read       after every rank filled its buffer (rank r: r * 1000003 + i), the kernel reads each
//              team member's buffer through ncclGetLsaPointer and ncclGetPeerPointer: every
//              element checked
//   write      the kernel writes into the next rank's buffer (second half) through
//              ncclGetPeerPointer; each rank then finds its previous rank's values in its own
//   devcomm    ncclDevCommCreate (all ranks at once) with the built-in LSA barrier, one made by
//              ncclLsaBarrierCreateRequirement over ncclTeamLsa and a resource buffer of its own;
//              ncclTeamWorld/Lsa/Rail answer; a kernel then runs 200 rounds: write a value into
//              its resource buffer, sync the requirement's barrier, read every member's value
//              through ncclGetResourceBufferLsaPointer (all checked), and finds the flat window
//              with ncclFindWindow; a last sync on the built-in barrier
//   lla2a      200 epochs of the LSA all-to-all (ncclLLA2ACreateRequirement in the same device
//              communicator): each rank sends every member a value and checks what it receives;
//              then ncclDevCommDestroy
//   no-cumem   with NCCL_CUMEM_ENABLE=0 (ncclMemAlloc gives cudaMalloc memory) ncclDevCommCreate
//              refuses, saying why, and no kernel runs
//   cudaMalloc a window of cudaMalloc memory registers and deregisters (its handle is no device
//              structure: device code cannot use it, collectives can)
//   weft_gpu_device_api_test [-n ranks (2)] [-m procs|threads]
// Ranks sharing a GPU need weft's NCCL_WEFT_ALLOW_GPU_SHARING=1 (set here).
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fork_ranks.h"
#include "one_thread_ranks.h"

namespace {

constexpr size_t kInts = 1 << 20;  // per rank: the first half read, the second half written by a peer
int gFailed = 0;

void report(int rank, const char* check, bool pass, const std::string& detail) {
  printf("rank %d %-10s %s | %s\n", rank, check, pass ? "PASS" : "FAIL", detail.c_str());
  fflush(stdout);
  if (!pass) ++gFailed;
}

__global__ void fill(int* buf, int rank) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kInts / 2; i += gridDim.x * blockDim.x)
    buf[i] = (int)(rank * 1000003 + i);
}

// out[0]: wrong elements read through the local pointer; out[1]: through the team's; out[2]:
// elements written.
__global__ void useWindow(ncclWindow_t win, int rank, int nRanks, unsigned long long* out) {
  const int* local = (const int*)ncclGetLocalPointer(win, 0);
  unsigned long long wrong = 0, wrongLocal = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kInts / 2; i += gridDim.x * blockDim.x)
    wrongLocal += local[i] != (int)(rank * 1000003 + i);
  atomicAdd(&out[0], wrongLocal);
  for (int p = 0; p < nRanks; ++p) {
    const int* lsa = (const int*)ncclGetLsaPointer(win, 0, p);
    const int* peer = (const int*)ncclGetPeerPointer(win, 0, p);
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kInts / 2; i += gridDim.x * blockDim.x) {
      const int want = (int)(p * 1000003 + i);
      wrong += (lsa[i] != want) + (peer[i] != want);
    }
  }
  atomicAdd(&out[1], wrong);
  int* next = (int*)ncclGetPeerPointer(win, kInts / 2 * sizeof(int), (rank + 1) % nRanks);
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kInts / 2; i += gridDim.x * blockDim.x)
    next[i] = rank * 7 + 1 + (int)(i % 1009);
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&out[2], kInts / 2);
}

constexpr int kRounds = 200;

// out[0]: wrong values read; out[1]: ncclFindWindow found the window of `buff`.
__global__ void barrierRounds(ncclDevComm dc, ncclLsaBarrierHandle bar, ncclDevResourceHandle data, ncclWindow_t win,
                              const void* buff, unsigned long long* out) {
  int* mine = (int*)ncclGetResourceBufferLocalPointer(dc, data);
  unsigned long long wrong = 0;
  {
    ncclLsaBarrierSession<ncclCoopCta> session{ncclCoopCta(), dc, ncclTeamLsa(dc), bar, 0};
    for (int r = 0; r < kRounds; ++r) {
      if (threadIdx.x == 0) mine[r % 2] = r * 1000 + dc.lsaRank;  // two slots: a slow reader keeps its round's
      session.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
      for (int p = threadIdx.x; p < dc.lsaSize; p += blockDim.x) {
        const volatile int* theirs = (const volatile int*)ncclGetResourceBufferLsaPointer(dc, data, p);
        wrong += theirs[r % 2] != r * 1000 + p;
      }
    }
  }
  ncclLsaBarrierSession<ncclCoopCta> builtIn{ncclCoopCta(), dc, ncclTeamTagLsa(), 0};
  builtIn.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
  ncclWindow_t found = ncclFindWindow(ncclCoopCta(), dc, buff);
  if (threadIdx.x == 0) out[1] = found == win;
  atomicAdd(&out[0], wrong);
}

// out[0] += wrong values received through the LSA all-to-all, over kRounds epochs.
__global__ void allToAllRounds(ncclDevComm dc, ncclLLA2AHandle handle, unsigned long long* out) {
  unsigned long long wrong = 0;
  ncclLLA2ASession<ncclCoopCta> a2a{ncclCoopCta(), dc, ncclTeamLsa(dc), handle, 0, dc.lsaSize};
  for (int r = 0; r < kRounds; ++r) {
    for (int p = threadIdx.x; p < dc.lsaSize; p += blockDim.x)  // slot `lsaRank` at every member
      a2a.send(p, dc.lsaRank, (uint64_t)(r * 1000 + dc.lsaRank) << 32 | (uint64_t)p);
    for (int q = threadIdx.x; q < dc.lsaSize; q += blockDim.x)
      wrong += a2a.template recv<uint64_t>(q) != ((uint64_t)(r * 1000 + q) << 32 | (uint64_t)dc.lsaRank);
    a2a.endEpoch(ncclCoopCta());
  }
  atomicAdd(&out[0], wrong);
}

struct Driven {
  std::vector<Rank>* ranks;
  std::vector<int> ids;
  int n;
};

// Every driven rank's stream has finished, and so have every other rank's (an all_reduce waits for all).
void barrier(Driven& d) {
  std::vector<float*> one(d.ids.size());
  ncclGroupStart();
  for (size_t k = 0; k < d.ids.size(); ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    CUDA_OK(cudaMallocAsync((void**)&one[k], sizeof(float), r.stream));
    if (ncclAllReduce(one[k], one[k], 1, ncclFloat, ncclSum, r.comm, r.stream) != ncclSuccess)
      report(d.ids[k], "barrier", false, ncclGetLastError(r.comm));
  }
  ncclGroupEnd();
  for (size_t k = 0; k < d.ids.size(); ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    CUDA_OK(cudaFreeAsync(one[k], r.stream));
    CUDA_OK(cudaStreamSynchronize(r.stream));
  }
}

bool noCuMem() {
  const char* v = getenv("NCCL_CUMEM_ENABLE");
  return v != nullptr && atoi(v) == 0;
}

// NCCL_CUMEM_ENABLE=0: ncclDevCommCreate must refuse, every rank, saying why.
void noDeviceApi(Driven& d) {
  const size_t m = d.ids.size();
  std::vector<ncclDevCommRequirements> reqs(m);
  std::vector<ncclDevComm> dcs(m);
  ncclResult_t s = ncclGroupStart();
  for (size_t k = 0; k < m; ++k) {
    memset(&reqs[k], 0, sizeof(reqs[k]));
    reqs[k].lsaBarrierCount = 1;
    (void)ncclDevCommCreate((*d.ranks)[k].comm, &reqs[k], &dcs[k]);
  }
  s = ncclGroupEnd();
  const std::string why = ncclGetLastError((*d.ranks)[0].comm);
  report(d.ids[0], "no-cumem", s == ncclInvalidUsage && why.find("needs cuMem") != std::string::npos,
         "ncclDevCommCreate refused: " + why);
}

void devComms(Driven& d, const std::vector<int*>& bufs, const std::vector<ncclWindow_t>& wins) {
  const size_t m = d.ids.size();
  std::vector<ncclDevCommRequirements> reqs(m);
  std::vector<ncclDevResourceRequirements> barReq(m), dataReq(m), a2aReq(m);
  std::vector<ncclLLA2AHandle> a2a(m);
  std::vector<ncclLsaBarrierHandle> bars(m);
  std::vector<ncclDevResourceHandle> data(m);
  std::vector<ncclDevComm> dcs(m);
  ncclResult_t s = ncclSuccess;
  for (size_t k = 0; k < m && s == ncclSuccess; ++k) {
    ncclComm_t comm = (*d.ranks)[k].comm;
    const ncclTeam world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm), rail = ncclTeamRail(comm);
    report(d.ids[k], "teams", world.nRanks == d.n && world.rank == d.ids[k] && lsa.nRanks == d.n &&
                                  lsa.rank == d.ids[k] && rail.nRanks == 1 && rail.stride == d.n &&
                                  ncclTeamRankToWorld(comm, lsa, d.n - 1) == d.n - 1,
           "world " + std::to_string(world.nRanks) + "/" + std::to_string(world.rank) + ", lsa " +
               std::to_string(lsa.nRanks) + "/" + std::to_string(lsa.rank) + ", rail " + std::to_string(rail.nRanks));
    memset(&reqs[k], 0, sizeof(reqs[k]));
    memset(&dataReq[k], 0, sizeof(dataReq[k]));
    s = ncclLsaBarrierCreateRequirement(lsa, 1, &bars[k], &barReq[k]);
    dataReq[k].bufferSize = 2 * sizeof(int);
    dataReq[k].outBufferHandle = &data[k];
    const int slots = ncclLLA2ACalcSlots(d.n, sizeof(uint64_t));
    if (s == ncclSuccess) s = ncclLLA2ACreateRequirement(1, slots, &a2a[k], &a2aReq[k]);
    barReq[k].next = &dataReq[k];
    dataReq[k].next = &a2aReq[k];
    reqs[k].resourceRequirementsList = &barReq[k];
    reqs[k].lsaBarrierCount = 1;
  }
  ncclResult_t g = ncclGroupStart();
  for (size_t k = 0; k < m && s == ncclSuccess; ++k) s = ncclDevCommCreate((*d.ranks)[k].comm, &reqs[k], &dcs[k]);
  ncclResult_t e = ncclGroupEnd();
  for (size_t k = 0; k < m; ++k)
    report(d.ids[k], "devcomm", g == ncclSuccess && s == ncclSuccess && e == ncclSuccess,
           s == ncclSuccess && e == ncclSuccess ? "created" : ncclGetLastError((*d.ranks)[k].comm));
  if (gFailed) return;
  std::vector<unsigned long long*> outs(m);
  for (size_t k = 0; k < m; ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    CUDA_OK(cudaMalloc((void**)&outs[k], 2 * sizeof(unsigned long long)));
    CUDA_OK(cudaMemsetAsync(outs[k], 0, 2 * sizeof(unsigned long long), r.stream));
    barrierRounds<<<1, 128, 0, r.stream>>>(dcs[k], bars[k], data[k], wins[k], bufs[k], outs[k]);
    CUDA_OK(cudaGetLastError());
  }
  for (size_t k = 0; k < m; ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    CUDA_OK(cudaStreamSynchronize(r.stream));
    unsigned long long out[2];
    CUDA_OK(cudaMemcpy(out, outs[k], sizeof(out), cudaMemcpyDeviceToHost));
    report(d.ids[k], "barrier", out[0] == 0,
           std::to_string(out[0]) + " wrong of " + std::to_string(kRounds * d.n) + " values read across " +
               std::to_string(kRounds) + " barrier rounds");
    report(d.ids[k], "findwindow", out[1] == 1, "ncclFindWindow names the buffer's window");
    CUDA_OK(cudaMemset(outs[k], 0, sizeof(unsigned long long)));
  }
  for (size_t k = 0; k < m; ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    allToAllRounds<<<1, 64, 0, r.stream>>>(dcs[k], a2a[k], outs[k]);
    CUDA_OK(cudaGetLastError());
  }
  for (size_t k = 0; k < m; ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    CUDA_OK(cudaStreamSynchronize(r.stream));
    unsigned long long wrong = 0;
    CUDA_OK(cudaMemcpy(&wrong, outs[k], sizeof(wrong), cudaMemcpyDeviceToHost));
    report(d.ids[k], "lla2a", wrong == 0,
           std::to_string(wrong) + " wrong of " + std::to_string(kRounds * d.n) + " values received over " +
               std::to_string(kRounds) + " all-to-all epochs");
    report(d.ids[k], "devdestroy", ncclDevCommDestroy(r.comm, &dcs[k]) == ncclSuccess, "");
    CUDA_OK(cudaFree(outs[k]));
  }
}

void runAll(Driven& d) {
  const size_t m = d.ids.size();
  std::vector<int*> bufs(m), plain(m);
  std::vector<ncclWindow_t> wins(m), plainWins(m);
  for (size_t k = 0; k < m; ++k) {
    CUDA_OK(cudaSetDevice((*d.ranks)[k].device));
    if (ncclMemAlloc((void**)&bufs[k], kInts * sizeof(int)) != ncclSuccess) report(d.ids[k], "flat", false, "alloc");
    CUDA_OK(cudaMalloc((void**)&plain[k], 1 << 20));
  }
  ncclResult_t s = ncclGroupStart();
  for (size_t k = 0; k < m && s == ncclSuccess; ++k)
    s = ncclCommWindowRegister((*d.ranks)[k].comm, bufs[k], kInts * sizeof(int), &wins[k], NCCL_WIN_COLL_SYMMETRIC);
  ncclResult_t e = ncclGroupEnd();
  for (size_t k = 0; k < m; ++k) {
    const bool ok = s == ncclSuccess && e == ncclSuccess && wins[k] != nullptr;
    report(d.ids[k], "flat", ok, ok ? "registered" : ncclGetLastError((*d.ranks)[k].comm));
  }
  if (gFailed) return;
  if (noCuMem()) {  // ncclMemAlloc gives cudaMalloc memory: windows work, but not for device code
    noDeviceApi(d);
    return;
  }
  for (size_t k = 0; k < m; ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    fill<<<64, 256, 0, r.stream>>>(bufs[k], d.ids[k]);
  }
  barrier(d);
  std::vector<unsigned long long*> outs(m);
  for (size_t k = 0; k < m; ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    CUDA_OK(cudaMalloc((void**)&outs[k], 3 * sizeof(unsigned long long)));
    CUDA_OK(cudaMemsetAsync(outs[k], 0, 3 * sizeof(unsigned long long), r.stream));
    useWindow<<<64, 256, 0, r.stream>>>(wins[k], d.ids[k], d.n, outs[k]);
    CUDA_OK(cudaGetLastError());
  }
  barrier(d);
  for (size_t k = 0; k < m; ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    unsigned long long out[3];
    CUDA_OK(cudaMemcpy(out, outs[k], sizeof(out), cudaMemcpyDeviceToHost));
    report(d.ids[k], "local", out[0] == 0, std::to_string(out[0]) + " wrong elements through ncclGetLocalPointer");
    report(d.ids[k], "read", out[1] == 0,
           std::to_string(out[1]) + " wrong of " + std::to_string(2 * d.n * (kInts / 2)) + " elements read");
    std::vector<int> host(kInts / 2);
    CUDA_OK(cudaMemcpy(host.data(), bufs[k] + kInts / 2, host.size() * sizeof(int), cudaMemcpyDeviceToHost));
    const int prev = (d.ids[k] - 1 + d.n) % d.n;
    size_t bad = 0;
    for (size_t i = 0; i < host.size(); ++i) bad += host[i] != prev * 7 + 1 + (int)(i % 1009);
    report(d.ids[k], "write", bad == 0 && out[2] == kInts / 2, std::to_string(bad) + " wrong elements from rank " +
                                                                   std::to_string(prev));
    CUDA_OK(cudaFree(outs[k]));
  }
  devComms(d, bufs, wins);
  s = ncclGroupStart();
  for (size_t k = 0; k < m && s == ncclSuccess; ++k)
    s = ncclCommWindowRegister((*d.ranks)[k].comm, plain[k], 1 << 20, &plainWins[k], 0);
  e = ncclGroupEnd();
  for (size_t k = 0; k < m; ++k) {
    const bool reg = s == ncclSuccess && e == ncclSuccess && plainWins[k] != nullptr;
    const bool dereg = ncclCommWindowDeregister((*d.ranks)[k].comm, plainWins[k]) == ncclSuccess;
    report(d.ids[k], "cudaMalloc", reg && dereg, "a window of cudaMalloc memory registers and deregisters");
    report(d.ids[k], "dereg", ncclCommWindowDeregister((*d.ranks)[k].comm, wins[k]) == ncclSuccess, "flat window");
    CUDA_OK(cudaSetDevice((*d.ranks)[k].device));
    (void)ncclMemFree(bufs[k]);
    CUDA_OK(cudaFree(plain[k]));
  }
}

int gpuCount() {
  int gpus = 0;
  CUDA_OK(cudaGetDeviceCount(&gpus));
  return gpus;
}

int runProcess(int rank, int n, const ncclUniqueId& id) {
  std::vector<Rank> ranks(1);
  ranks[0].device = rank % gpuCount();
  CUDA_OK(cudaSetDevice(ranks[0].device));
  if (ncclCommInitRank(&ranks[0].comm, n, id, rank) != ncclSuccess) return 5;
  CUDA_OK(cudaStreamCreateWithFlags(&ranks[0].stream, cudaStreamNonBlocking));
  Driven d{&ranks, {rank}, n};
  runAll(d);
  ncclCommDestroy(ranks[0].comm);
  return gFailed == 0 ? 0 : 1;
}

int runThreads(int n) {
  std::vector<Rank> ranks(n);
  if (!makeOneThreadRanks(ranks, gpuCount())) return 5;
  Driven d{&ranks, {}, n};
  for (int r = 0; r < n; ++r) d.ids.push_back(r);
  runAll(d);
  for (Rank& r : ranks) ncclCommDestroy(r.comm);
  return gFailed;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 2;
  std::string mode = "procs";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      n = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
      mode = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [-n ranks] [-m procs|threads]\n", argv[0]);
      return 2;
    }
  }
  setenv("NCCL_WEFT_ALLOW_GPU_SHARING", "1", 0);
  const int failed = n < 1 ? 1 : mode == "threads" ? runThreads(n)
                   : forkRanks(n, [n](int rank, const ncclUniqueId& id) { return runProcess(rank, n, id); });
  printf("%s: %d rank(s), %s: %s\n", argv[0], n, mode.c_str(), failed == 0 ? "PASS" : "FAIL");
  return failed == 0 ? 0 : 1;
}
