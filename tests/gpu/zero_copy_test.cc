// Zero-copy point-to-point from registered buffers (transport/p2p/reg_sharing.h,
// device/algo/p2p_direct.cuh) on real GPUs, public API only. Each rank sends to the next and
// receives from the previous one in one group (two ranks: both directions), for each kind of
// memory (cudaMalloc: legacy IPC; ncclMemAlloc: cuMem fds) and each size (below and above a
// connection step per channel, odd byte counts, a receive buffer 3 bytes into its allocation):
//   unregistered  plain buffers: right results (the connection buffers)
//   registered    send and receive buffers registered (ncclCommRegister): right results, repeated
//                 (the first transfers may still take the buffers while the sharing travels)
//   recv-only     only the receive buffer registered: right results (the sender asks for no offer)
//   withdrawn     after ncclCommDeregister of the receive buffers: right results
//   graph         registered buffers in a captured CUDA graph, replayed with new data: right results
//   two-in-one    two registrations inside one cudaMalloc allocation, received into in turn
//   window        both buffers registered by every rank together (ncclCommWindowRegister, one
//                 group for the ranks a thread drives): each rank maps its peers' windows inside
//                 the call (window-maps: the log says so, nothing left for later), so a CUDA graph
//                 captured before any eager launch already sends directly; then eager rounds, and
//                 rounds after ncclCommWindowDeregister (window-gone)
//   direct-count  at ncclCommDestroy each rank logs how many receive parts landed directly; the
//                 test reads its NCCL_DEBUG_FILE and requires some (with --expect-direct)
//   maps          that log names no registration the rank could not map
// Every output byte is checked; outputs are poisoned before each call.
//   weft_gpu_zero_copy_test [-n ranks (2)] [-m procs|threads] [--expect-direct]
// procs: one process per rank (rank r on GPU r % GPUs); threads: one process, one thread driving
// every rank. Ranks sharing a GPU need weft's NCCL_WEFT_ALLOW_GPU_SHARING=1 (set here).
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "fork_ranks.h"
#include "nccl.h"
#include "one_thread_ranks.h"

namespace {

int gFailed = 0;

void report(int rank, const char* check, bool pass, const std::string& detail) {
  printf("rank %d %-13s %s | %s\n", rank, check, pass ? "PASS" : "FAIL", detail.c_str());
  fflush(stdout);
  if (!pass) ++gFailed;
}

enum class Mem { kCudaMalloc, kNcclMemAlloc };
const char* memName(Mem m) { return m == Mem::kCudaMalloc ? "cudaMalloc" : "ncclMemAlloc"; }

// One rank's buffers: the receive buffer starts 3 bytes into its allocation.
struct Buffers {
  Mem mem = Mem::kCudaMalloc;
  size_t bytes = 0;
  char* sendAlloc = nullptr;
  char* recvAlloc = nullptr;
  char* send() const { return sendAlloc; }
  size_t recvLead = 3;  // where the receive buffer starts in its allocation
  char* recv() const { return recvAlloc + recvLead; }
  void* sendHandle = nullptr;
  void* recvHandle = nullptr;
};

void* allocate(Mem mem, size_t bytes) {
  void* p = nullptr;
  if (mem == Mem::kCudaMalloc)
    CUDA_OK(cudaMalloc(&p, bytes));
  else if (ncclMemAlloc(&p, bytes) != ncclSuccess)
    exit(3);
  return p;
}
void release(Mem mem, void* p) {
  if (mem == Mem::kCudaMalloc)
    CUDA_OK(cudaFree(p));
  else
    (void)ncclMemFree(p);
}

uint8_t pattern(int rank, int iter, size_t i) {
  return (uint8_t)(i * 7 + (size_t)rank * 31 + (size_t)iter * 13 + (i >> 12));
}

// Fills rank `rank`'s send buffer for iteration `iter` and poisons its receive buffer.
void prepare(const Rank& r, int rank, int iter, const Buffers& b) {
  std::vector<uint8_t> host(b.bytes);
  for (size_t i = 0; i < b.bytes; ++i) host[i] = pattern(rank, iter, i);
  CUDA_OK(cudaSetDevice(r.device));
  // On the rank's own stream: a cudaMemcpy from pageable memory may return before its DMA is
  // done, and the legacy stream does not order the rank's non-blocking stream.
  CUDA_OK(cudaMemcpyAsync(b.send(), host.data(), b.bytes, cudaMemcpyHostToDevice, r.stream));
  CUDA_OK(cudaMemsetAsync(b.recv(), 0xa5, b.bytes, r.stream));
  CUDA_OK(cudaStreamSynchronize(r.stream));
}

// Whether rank `rank` received exactly what its previous rank sent in iteration `iter`.
bool received(const Rank& r, int rank, int n, int iter, const Buffers& b, std::string* why) {
  std::vector<uint8_t> host(b.bytes);
  CUDA_OK(cudaSetDevice(r.device));
  CUDA_OK(cudaStreamSynchronize(r.stream));
  CUDA_OK(cudaMemcpy(host.data(), b.recv(), b.bytes, cudaMemcpyDeviceToHost));
  const int from = (rank - 1 + n) % n;
  for (size_t i = 0; i < b.bytes; ++i) {
    if (host[i] != pattern(from, iter, i)) {
      *why = "byte " + std::to_string(i) + " of " + std::to_string(b.bytes) + " is " + std::to_string(host[i]) +
             ", expected " + std::to_string(pattern(from, iter, i));
      return false;
    }
  }
  return true;
}

ncclResult_t exchange(const Rank& r, int rank, int n, const Buffers& b) {
  ncclResult_t s = ncclGroupStart();
  if (s == ncclSuccess) s = ncclSend(b.send(), b.bytes, ncclInt8, (rank + 1) % n, r.comm, r.stream);
  if (s == ncclSuccess) s = ncclRecv(b.recv(), b.bytes, ncclInt8, (rank - 1 + n) % n, r.comm, r.stream);
  ncclResult_t e = ncclGroupEnd();
  return s != ncclSuccess ? s : e;
}

// The ranks this caller drives (procs: one; threads: all), with their global rank numbers.
struct Driven {
  std::vector<Rank>* ranks;
  std::vector<int> ids;
  int n;
  std::string log;  // this process's NCCL_DEBUG_FILE
};

// Runs `iters` exchanges of every driven rank (one group for all of them) and checks each.
void rounds(Driven& d, std::vector<Buffers>& bufs, const char* check, int iters, int firstIter) {
  for (int it = firstIter; it < firstIter + iters; ++it) {
    for (size_t k = 0; k < d.ids.size(); ++k) prepare((*d.ranks)[k], d.ids[k], it, bufs[k]);
    ncclResult_t s = ncclGroupStart();
    for (size_t k = 0; k < d.ids.size() && s == ncclSuccess; ++k) s = exchange((*d.ranks)[k], d.ids[k], d.n, bufs[k]);
    ncclResult_t e = ncclGroupEnd();
    for (size_t k = 0; k < d.ids.size(); ++k) {
      std::string why = s != ncclSuccess || e != ncclSuccess ? ncclGetLastError((*d.ranks)[k].comm) : "";
      const bool ok = s == ncclSuccess && e == ncclSuccess && received((*d.ranks)[k], d.ids[k], d.n, it, bufs[k], &why);
      report(d.ids[k], check, ok,
             std::string(memName(bufs[k].mem)) + " " + std::to_string(bufs[k].bytes) + " B, round " +
                 std::to_string(it) + (ok ? "" : ": " + why));
    }
  }
}

void registerBuffers(Driven& d, std::vector<Buffers>& bufs, bool send, bool recv) {
  for (size_t k = 0; k < d.ids.size(); ++k) {
    ncclComm_t comm = (*d.ranks)[k].comm;
    Buffers& b = bufs[k];
    if (send && ncclCommRegister(comm, b.send(), b.bytes, &b.sendHandle) != ncclSuccess)
      report(d.ids[k], "register", false, "send");
    if (recv && ncclCommRegister(comm, b.recv(), b.bytes, &b.recvHandle) != ncclSuccess)
      report(d.ids[k], "register", false, "recv");
  }
}

void deregisterBuffers(Driven& d, std::vector<Buffers>& bufs) {
  for (size_t k = 0; k < d.ids.size(); ++k) {
    ncclComm_t comm = (*d.ranks)[k].comm;
    Buffers& b = bufs[k];
    if (b.sendHandle && ncclCommDeregister(comm, b.sendHandle) != ncclSuccess)
      report(d.ids[k], "deregister", false, "send");
    if (b.recvHandle && ncclCommDeregister(comm, b.recvHandle) != ncclSuccess)
      report(d.ids[k], "deregister", false, "recv");
    b.sendHandle = b.recvHandle = nullptr;
  }
}

// Registered buffers in a CUDA graph: each driven rank captures its exchange on its own stream
// (one group per rank: a capture belongs to one stream), then replays with new data.
void graphRounds(Driven& d, std::vector<Buffers>& bufs, int firstIter) {
  std::vector<cudaGraphExec_t> execs(d.ids.size(), nullptr);
  for (size_t k = 0; k < d.ids.size(); ++k) {
    Rank& r = (*d.ranks)[k];
    CUDA_OK(cudaSetDevice(r.device));
    CUDA_OK(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal));
    ncclResult_t s = exchange(r, d.ids[k], d.n, bufs[k]);
    cudaGraph_t g;
    CUDA_OK(cudaStreamEndCapture(r.stream, &g));
    CUDA_OK(cudaGraphInstantiate(&execs[k], g, 0));
    CUDA_OK(cudaGraphDestroy(g));
    if (s != ncclSuccess) report(d.ids[k], "graph", false, std::string("capture: ") + ncclGetLastError(r.comm));
  }
  for (int it = firstIter; it < firstIter + 3; ++it) {
    for (size_t k = 0; k < d.ids.size(); ++k) prepare((*d.ranks)[k], d.ids[k], it, bufs[k]);
    for (size_t k = 0; k < d.ids.size(); ++k) {
      CUDA_OK(cudaSetDevice((*d.ranks)[k].device));
      CUDA_OK(cudaGraphLaunch(execs[k], (*d.ranks)[k].stream));
    }
    for (size_t k = 0; k < d.ids.size(); ++k) {
      std::string why;
      const bool ok = received((*d.ranks)[k], d.ids[k], d.n, it, bufs[k], &why);
      report(d.ids[k], "graph", ok,
             std::string(memName(bufs[k].mem)) + " " + std::to_string(bufs[k].bytes) + " B, replay " +
                 std::to_string(it) + (ok ? "" : ": " + why));
    }
  }
  for (cudaGraphExec_t e : execs) CUDA_OK(cudaGraphExecDestroy(e));
}

// Two registrations inside one cudaMalloc allocation, each received into in turn: the sender
// maps the allocation's legacy IPC handle once (CUDA refuses a second open in one process).
void twoInOne(Driven& d, int firstIter) {
  const size_t bytes = 64u << 20, second = bytes + 4096;
  std::vector<Buffers> bufs(d.ids.size());
  std::vector<void*> handles;
  for (size_t k = 0; k < d.ids.size(); ++k) {
    ncclComm_t comm = (*d.ranks)[k].comm;
    CUDA_OK(cudaSetDevice((*d.ranks)[k].device));
    Buffers& b = bufs[k];
    b.bytes = bytes;
    b.sendAlloc = (char*)allocate(Mem::kCudaMalloc, bytes);
    b.recvAlloc = (char*)allocate(Mem::kCudaMalloc, second + bytes);
    void* h[3] = {};
    if (ncclCommRegister(comm, b.sendAlloc, bytes, &h[0]) != ncclSuccess ||
        ncclCommRegister(comm, b.recvAlloc, bytes, &h[1]) != ncclSuccess ||
        ncclCommRegister(comm, b.recvAlloc + second, bytes, &h[2]) != ncclSuccess)
      report(d.ids[k], "two-in-one", false, "registration failed");
    handles.insert(handles.end(), h, h + 3);
  }
  for (size_t lead : {(size_t)0, second}) {
    for (Buffers& b : bufs) b.recvLead = lead;
    rounds(d, bufs, "two-in-one", 2, firstIter);
    firstIter += 2;
  }
  for (size_t k = 0; k < d.ids.size(); ++k) {
    for (int i = 0; i < 3; ++i) (void)ncclCommDeregister((*d.ranks)[k].comm, handles[k * 3 + i]);
    CUDA_OK(cudaSetDevice((*d.ranks)[k].device));
    release(Mem::kCudaMalloc, bufs[k].sendAlloc);
    release(Mem::kCudaMalloc, bufs[k].recvAlloc);
  }
}

// Lines of a debug log containing `text`.
long linesWith(const std::string& path, const char* text) {
  std::ifstream in(path);
  std::string line;
  long n = 0;
  while (std::getline(in, line)) n += line.find(text) != std::string::npos;
  return n;
}

// Windows: every driven rank registers both buffers in one group (a thread driving several ranks
// cannot make one rank's collective call wait for the others'), then a graph captured first.
void windowRounds(Driven& d, Mem mem, int firstIter) {
  const size_t bytes = (64u << 20) + 4099;
  std::vector<Buffers> bufs(d.ids.size());
  std::vector<ncclWindow_t> wins(2 * d.ids.size(), nullptr);
  for (size_t k = 0; k < d.ids.size(); ++k) {
    CUDA_OK(cudaSetDevice((*d.ranks)[k].device));
    bufs[k].mem = mem;
    bufs[k].bytes = bytes;
    bufs[k].recvLead = 0;  // NCCL wants windows 4096-aligned in their allocation (weft does not)
    bufs[k].sendAlloc = (char*)allocate(mem, bytes);
    bufs[k].recvAlloc = (char*)allocate(mem, bytes);
  }
  const long mappedBefore = linesWith(d.log, "for zero-copy sends");
  ncclResult_t s = ncclGroupStart();
  for (size_t k = 0; k < d.ids.size() && s == ncclSuccess; ++k) {
    ncclComm_t comm = (*d.ranks)[k].comm;
    s = ncclCommWindowRegister(comm, bufs[k].send(), bytes, &wins[2 * k], NCCL_WIN_COLL_SYMMETRIC);
    if (s == ncclSuccess) s = ncclCommWindowRegister(comm, bufs[k].recv(), bytes, &wins[2 * k + 1], 0);
  }
  ncclResult_t e = ncclGroupEnd();
  for (size_t k = 0; k < d.ids.size(); ++k) {
    const bool ok = s == ncclSuccess && e == ncclSuccess && wins[2 * k] != nullptr && wins[2 * k + 1] != nullptr;
    const std::string why = ok ? "" : std::string(": ") + ncclGetLastError((*d.ranks)[k].comm);
    report(d.ids[k], "window", ok, std::string(memName(mem)) + " register" + why);
  }
  const long mapped = linesWith(d.log, "for zero-copy sends") - mappedBefore;
  const long late = linesWith(d.log, "has not come yet");
  report(d.ids[0], "window-maps", mapped >= 2 * (long)d.ids.size() && late == 0,
         std::to_string(mapped) + " peer windows mapped inside the calls, " + std::to_string(late) + " left for later");
  graphRounds(d, bufs, firstIter);
  rounds(d, bufs, "window", 2, firstIter + 3);
  for (size_t k = 0; k < d.ids.size(); ++k)
    for (int i = 0; i < 2; ++i)
      if (ncclCommWindowDeregister((*d.ranks)[k].comm, wins[2 * k + i]) != ncclSuccess)
        report(d.ids[k], "window", false, "deregister");
  rounds(d, bufs, "window-gone", 2, firstIter + 5);
  for (size_t k = 0; k < d.ids.size(); ++k) {
    CUDA_OK(cudaSetDevice((*d.ranks)[k].device));
    release(mem, bufs[k].sendAlloc);
    release(mem, bufs[k].recvAlloc);
  }
}

void runAll(Driven& d) {
  const size_t sizes[] = {200 * 1000 + 1, 64u << 20, (128u << 20) + 4099};
  int iter = 0;
  for (Mem mem : {Mem::kCudaMalloc, Mem::kNcclMemAlloc}) {
    for (size_t bytes : sizes) {
      std::vector<Buffers> bufs(d.ids.size());
      for (size_t k = 0; k < d.ids.size(); ++k) {
        CUDA_OK(cudaSetDevice((*d.ranks)[k].device));
        bufs[k].mem = mem;
        bufs[k].bytes = bytes;
        bufs[k].sendAlloc = (char*)allocate(mem, bytes);
        bufs[k].recvAlloc = (char*)allocate(mem, bytes + 3);
      }
      rounds(d, bufs, "unregistered", 1, iter);
      iter += 1;
      registerBuffers(d, bufs, false, true);
      rounds(d, bufs, "recv-only", 2, iter);
      iter += 2;
      registerBuffers(d, bufs, true, false);
      rounds(d, bufs, "registered", 4, iter);
      iter += 4;
      graphRounds(d, bufs, iter);
      iter += 3;
      deregisterBuffers(d, bufs);
      rounds(d, bufs, "withdrawn", 2, iter);
      iter += 2;
      for (size_t k = 0; k < d.ids.size(); ++k) {
        CUDA_OK(cudaSetDevice((*d.ranks)[k].device));
        release(mem, bufs[k].sendAlloc);
        release(mem, bufs[k].recvAlloc);
      }
    }
  }
  twoInOne(d, iter);
  iter += 4;
  for (Mem mem : {Mem::kCudaMalloc, Mem::kNcclMemAlloc}) {
    windowRounds(d, mem, iter);
    iter += 7;
  }
}

// Sum of "N receive part(s) landed directly" in a debug log; *mapFailures counts registrations a
// rank could not map.
long directParts(const std::string& path, int* mapFailures) {
  std::ifstream in(path);
  std::string line;
  long total = 0;
  *mapFailures = 0;
  while (std::getline(in, line)) {
    if (line.find("could not map registration") != std::string::npos) {
      printf("%s\n", line.c_str());
      ++*mapFailures;
    }
    const size_t at = line.find(" receive part(s) landed directly");
    if (at == std::string::npos) continue;
    size_t b = line.rfind(' ', at - 1);
    total += strtol(line.c_str() + (b == std::string::npos ? 0 : b + 1), nullptr, 10);
  }
  return total;
}

void setLogging(const std::string& file) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "REG", 1);
  setenv("NCCL_DEBUG_FILE", file.c_str(), 1);
}

int gpuCount() {
  int gpus = 0;
  CUDA_OK(cudaGetDeviceCount(&gpus));
  return gpus;
}

std::string logOfThisProcess() { return "/tmp/weft-zero-copy-" + std::to_string(getpid()) + ".log"; }

// One process per rank (its logging was set before the library read its settings).
int runProcess(int rank, int n, const ncclUniqueId& id, bool expectDirect) {
  const std::string log = logOfThisProcess();
  std::vector<Rank> ranks(1);
  ranks[0].device = rank % gpuCount();
  CUDA_OK(cudaSetDevice(ranks[0].device));
  if (ncclCommInitRank(&ranks[0].comm, n, id, rank) != ncclSuccess) return 5;
  CUDA_OK(cudaStreamCreateWithFlags(&ranks[0].stream, cudaStreamNonBlocking));
  Driven d{&ranks, {rank}, n, log};
  runAll(d);
  CUDA_OK(cudaStreamDestroy(ranks[0].stream));
  if (ncclCommDestroy(ranks[0].comm) != ncclSuccess) report(rank, "destroy", false, "");
  int mapFailures = 0;
  const long parts = directParts(log, &mapFailures);
  report(rank, "direct-count", !expectDirect || parts > 0, std::to_string(parts) + " receive parts landed directly");
  report(rank, "maps", mapFailures == 0, std::to_string(mapFailures) + " registrations could not be mapped");
  unlink(log.c_str());
  return gFailed == 0 ? 0 : 1;
}

int runThreads(int n, bool expectDirect) {
  const std::string log = logOfThisProcess();
  setLogging(log);
  std::vector<Rank> ranks(n);
  if (!makeOneThreadRanks(ranks, gpuCount())) return 5;
  Driven d{&ranks, {}, n, log};
  for (int r = 0; r < n; ++r) d.ids.push_back(r);
  runAll(d);
  for (Rank& r : ranks) {
    CUDA_OK(cudaStreamDestroy(r.stream));
    if (ncclCommDestroy(r.comm) != ncclSuccess) report(0, "destroy", false, "");
  }
  int mapFailures = 0;
  const long parts = directParts(log, &mapFailures);
  report(0, "direct-count", !expectDirect || parts > 0, std::to_string(parts) + " receive parts landed directly");
  report(0, "maps", mapFailures == 0, std::to_string(mapFailures) + " registrations could not be mapped");
  unlink(log.c_str());
  return gFailed;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 2;
  std::string mode = "procs";
  bool expectDirect = false;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-m") && i + 1 < argc)
      mode = argv[++i];
    else if (!strcmp(argv[i], "--expect-direct"))
      expectDirect = true;
    else {
      fprintf(stderr, "usage: %s [-n ranks] [-m procs|threads] [--expect-direct]\n", argv[0]);
      return 2;
    }
  }
  if (n < 2) {
    fprintf(stderr, "zero-copy needs at least 2 ranks\n");
    return 2;
  }
  setenv("NCCL_WEFT_ALLOW_GPU_SHARING", "1", 0);
  const int failed = mode == "threads" ? runThreads(n, expectDirect)
                                      : forkRanks(
                                            n,
                                            [&](int rank, const ncclUniqueId& id) {
                                              return runProcess(rank, n, id, expectDirect);
                                            },
                                            [](int) { setLogging(logOfThisProcess()); });
  printf("%s: %d rank(s), %s: %s\n", argv[0], n, mode.c_str(), failed == 0 ? "PASS" : "FAIL");
  return failed == 0 ? 0 : 1;
}
