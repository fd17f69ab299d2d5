#include "runner.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "check.h"

namespace weft::perf {
namespace {

// A failed call ends the process: other ranks are stuck in collectives with this one, and a
// benchmark has nothing useful to do after an error. The message names the call and the rank.
[[noreturn]] void fatal(const char* what, const char* why, int rank) {
  fflush(stdout);
  fprintf(stderr, "weft-perf: rank %d: %s failed: %s\n", rank, what, why);
  fflush(stderr);
  _exit(kExitFailure);
}

[[noreturn]] void fatalNccl(const char* what, ncclResult_t r, int rank) {
  char why[1400];
  const char* last = ncclGetLastError(nullptr);
  snprintf(why, sizeof(why), "%s (%d)%s%s", ncclGetErrorString(r), (int)r, last && *last ? "; last error: " : "",
           last ? last : "");
  fatal(what, why, rank);
}

#define PERF_NCCL(call, rank)                                   \
  do {                                                          \
    ncclResult_t perf_r_ = (call);                              \
    if (perf_r_ != ncclSuccess) fatalNccl(#call, perf_r_, rank); \
  } while (0)

#define PERF_CUDA(call, rank)                                             \
  do {                                                                    \
    cudaError_t perf_e_ = (call);                                         \
    if (perf_e_ != cudaSuccess) fatal(#call, cudaGetErrorString(perf_e_), rank); \
  } while (0)

class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != gen; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int n_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

// One rank: a GPU, its communicator, stream, events and buffers.
struct Slot {
  int rank = 0;
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  char* sendBuf = nullptr;
  char* recvBuf = nullptr;
  void* sendHandle = nullptr;  // -R 1: registrations
  void* recvHandle = nullptr;
  ncclWindow_t sendWindow = nullptr;  // -R 2: windows
  ncclWindow_t recvWindow = nullptr;
  std::vector<char> host;
  // Operands of the placement being run.
  const char* send = nullptr;
  char* recv = nullptr;
  double timeUs = 0;
  int64_t wrong = -1;
};

struct RankTimes {
  double timeUs[2] = {0, 0};
  int64_t wrong[2] = {-1, -1};
  bool ran[2] = {false, false};
};

struct ProcessState {
  const Options& opts;
  const std::vector<Case>& cases;
  int processIndex;
  int deviceCount;
  size_t bufBytes;
  ncclUniqueId id;
  Barrier barrier;
  std::vector<RankTimes> results;  // one per rank of this process, for the current case
  ResultSink* sink;
  std::mutex printMutex;
};

// Enqueues one operation on every rank of the thread (as one group when there are several).
void launchOps(std::vector<Slot>& slots, const Case& c, const CaseShape& shape, int nranks) {
  const bool group = slots.size() > 1;
  if (group) PERF_NCCL(ncclGroupStart(), slots[0].rank);
  for (Slot& s : slots) {
    if (group) PERF_CUDA(cudaSetDevice(s.device), s.rank);
    const size_t n = shape.count;
    switch (c.coll) {
      case Coll::AllReduce:
        PERF_NCCL(ncclAllReduce(s.send, s.recv, n, c.type, c.op, s.comm, s.stream), s.rank);
        break;
      case Coll::AllGather:
        PERF_NCCL(ncclAllGather(s.send, s.recv, n, c.type, s.comm, s.stream), s.rank);
        break;
      case Coll::ReduceScatter:
        PERF_NCCL(ncclReduceScatter(s.send, s.recv, n, c.type, c.op, s.comm, s.stream), s.rank);
        break;
      case Coll::Broadcast:
        PERF_NCCL(ncclBroadcast(s.send, s.recv, n, c.type, c.root, s.comm, s.stream), s.rank);
        break;
      case Coll::Reduce:
        PERF_NCCL(ncclReduce(s.send, s.recv, n, c.type, c.op, c.root, s.comm, s.stream), s.rank);
        break;
      case Coll::AlltoAll:
        PERF_NCCL(ncclAlltoAll(s.send, s.recv, n, c.type, s.comm, s.stream), s.rank);
        break;
      case Coll::Gather:
        PERF_NCCL(ncclGather(s.send, s.recv, n, c.type, c.root, s.comm, s.stream), s.rank);
        break;
      case Coll::Scatter:
        PERF_NCCL(ncclScatter(s.send, s.recv, n, c.type, c.root, s.comm, s.stream), s.rank);
        break;
      case Coll::SendRecv: {
        // A ring: send to the next rank, receive from the previous one, as one exchange.
        const int next = (s.rank + 1) % nranks, prev = (s.rank + nranks - 1) % nranks;
        PERF_NCCL(ncclGroupStart(), s.rank);
        PERF_NCCL(ncclSend(s.send, n, c.type, next, s.comm, s.stream), s.rank);
        PERF_NCCL(ncclRecv(s.recv, n, c.type, prev, s.comm, s.stream), s.rank);
        PERF_NCCL(ncclGroupEnd(), s.rank);
        break;
      }
    }
  }
  if (group) PERF_NCCL(ncclGroupEnd(), slots[0].rank);
}

// Fills the inputs, runs the operation once and counts wrong elements on each rank.
void checkOnce(std::vector<Slot>& slots, const Case& c, const CaseShape& shape, bool inPlace, int nranks) {
  const size_t ts = typeSize(c.type);
  const CheckSpec spec{c.coll, c.type, c.op, c.root, nranks, shape.count};
  constexpr int kPoison = 0xA5;  // stale results from an earlier case must not pass as correct
  for (Slot& s : slots) {
    PERF_CUDA(cudaSetDevice(s.device), s.rank);
    const size_t operandBytes = std::max(shape.sendElems, shape.recvElems) * ts;
    if (inPlace) PERF_CUDA(cudaMemsetAsync(s.recvBuf, kPoison, operandBytes, s.stream), s.rank);
    else PERF_CUDA(cudaMemsetAsync(s.recv, kPoison, shape.recvElems * ts, s.stream), s.rank);
    PERF_CUDA(fillInput(spec, s.rank, const_cast<char*>(s.send), shape.sendElems, s.stream), s.rank);
  }
  launchOps(slots, c, shape, nranks);
  for (Slot& s : slots) {
    PERF_CUDA(cudaSetDevice(s.device), s.rank);
    PERF_CUDA(cudaStreamSynchronize(s.stream), s.rank);
    s.host.resize(shape.recvElems * ts);
    if (!s.host.empty()) PERF_CUDA(cudaMemcpy(s.host.data(), s.recv, s.host.size(), cudaMemcpyDeviceToHost), s.rank);
    s.wrong = countWrong(spec, s.rank, s.host.data(), shape.recvElems);
  }
}

// Captures `iterations` operations on every rank's stream, one graph per GPU. Several threads
// capture at the same time, so each keeps its capture to itself. Every capture ends before any
// graph is instantiated: with one thread driving several GPUs the captures are global, and
// instantiating while another stream still captures is refused.
std::vector<cudaGraph_t> captureOps(std::vector<Slot>& slots, const Options& opts, const Case& c,
                                    const CaseShape& shape, int nranks, int iterations) {
  const cudaStreamCaptureMode mode = opts.threads > 1 ? cudaStreamCaptureModeThreadLocal : cudaStreamCaptureModeGlobal;
  for (Slot& s : slots) {
    PERF_CUDA(cudaSetDevice(s.device), s.rank);
    PERF_CUDA(cudaStreamSynchronize(s.stream), s.rank);
    PERF_CUDA(cudaStreamBeginCapture(s.stream, mode), s.rank);
  }
  for (int i = 0; i < iterations; ++i) launchOps(slots, c, shape, nranks);
  std::vector<cudaGraph_t> captured(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    PERF_CUDA(cudaSetDevice(slots[i].device), slots[i].rank);
    PERF_CUDA(cudaStreamEndCapture(slots[i].stream, &captured[i]), slots[i].rank);
  }
  return captured;
}

// Times one placement (out-of-place or in-place) of a case on the thread's ranks.
void runPlacement(std::vector<Slot>& slots, const Options& opts, const Case& c, bool inPlace) {
  const int nranks = opts.nranks();
  const size_t ts = typeSize(c.type);
  const CaseShape shape = shapeFor(c.coll, c.size, ts, nranks);
  for (Slot& s : slots) {
    if (inPlace) {
      const InPlaceOffsets off = inPlaceOffsets(c.coll, shape.count, s.rank);
      s.send = s.recvBuf + off.sendOffset * ts;
      s.recv = s.recvBuf + off.recvOffset * ts;
    } else {
      s.send = s.sendBuf;
      s.recv = s.recvBuf;
    }
    s.wrong = -1;
  }
  if (opts.check) checkOnce(slots, c, shape, inPlace, nranks);
  for (int i = 0; i < opts.warmup; ++i) launchOps(slots, c, shape, nranks);

  std::vector<cudaGraphExec_t> graphs;
  // WEFT_PERF_CAPTURE_FIRST=1 (stream mode): one iteration is captured into a graph (then
  // destroyed) before the timed launches: what a communicator's launches outside graphs cost once
  // it has been captured (NCCL_GRAPH_MIXING_SUPPORT orders them against graph replays).
  if (opts.graphLaunches == 0 && std::getenv("WEFT_PERF_CAPTURE_FIRST") != nullptr) {
    std::vector<cudaGraph_t> captured = captureOps(slots, opts, c, shape, nranks, 1);
    for (size_t i = 0; i < slots.size(); ++i) PERF_CUDA(cudaGraphDestroy(captured[i]), slots[i].rank);
  }
  if (opts.graphLaunches > 0) {
    std::vector<cudaGraph_t> captured = captureOps(slots, opts, c, shape, nranks, opts.iters);
    for (size_t i = 0; i < slots.size(); ++i) {
      cudaGraphExec_t exec;
      PERF_CUDA(cudaSetDevice(slots[i].device), slots[i].rank);
      PERF_CUDA(cudaGraphInstantiate(&exec, captured[i], 0), slots[i].rank);
      PERF_CUDA(cudaGraphDestroy(captured[i]), slots[i].rank);
      graphs.push_back(exec);
    }
  }
  // One untimed operation right before the start events: it completes at nearly the same moment
  // on every GPU, so all ranks start their clocks together.
  launchOps(slots, c, shape, nranks);
  for (Slot& s : slots) {
    PERF_CUDA(cudaSetDevice(s.device), s.rank);
    PERF_CUDA(cudaEventRecord(s.start, s.stream), s.rank);
  }
  if (graphs.empty()) {
    // WEFT_PERF_HOST_TIME=1: also the host's time per operation in the enqueue calls (when the
    // GPU keeps up, this bounds the time per operation from below).
    const auto hostStart = std::chrono::steady_clock::now();
    for (int i = 0; i < opts.iters; ++i) launchOps(slots, c, shape, nranks);
    if (std::getenv("WEFT_PERF_HOST_TIME") != nullptr) {
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - hostStart).count();
      std::fprintf(stderr, "# rank %d: host %.2f us per operation in the enqueue calls\n", slots[0].rank, us / opts.iters);
    }
  } else {
    for (int k = 0; k < opts.graphLaunches; ++k) {
      for (size_t i = 0; i < slots.size(); ++i) {
        PERF_CUDA(cudaSetDevice(slots[i].device), slots[i].rank);
        PERF_CUDA(cudaGraphLaunch(graphs[i], slots[i].stream), slots[i].rank);
      }
    }
  }
  const double ops = (double)opts.iters * (graphs.empty() ? 1 : opts.graphLaunches);
  for (Slot& s : slots) {
    PERF_CUDA(cudaSetDevice(s.device), s.rank);
    PERF_CUDA(cudaEventRecord(s.stop, s.stream), s.rank);
  }
  for (Slot& s : slots) {
    float ms = 0;
    PERF_CUDA(cudaSetDevice(s.device), s.rank);
    PERF_CUDA(cudaEventSynchronize(s.stop), s.rank);
    PERF_CUDA(cudaEventElapsedTime(&ms, s.start, s.stop), s.rank);
    s.timeUs = (double)ms * 1e3 / ops;
  }
  for (size_t i = 0; i < graphs.size(); ++i) {
    PERF_CUDA(cudaSetDevice(slots[i].device), slots[i].rank);
    PERF_CUDA(cudaGraphExecDestroy(graphs[i]), slots[i].rank);
  }
}

void setUpSlots(ProcessState& ps, int threadIndex, std::vector<Slot>* slots) {
  const Options& opts = ps.opts;
  const int firstRank = ps.processIndex * opts.ranksPerProcess() + threadIndex * opts.gpusPerThread;
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  for (int g = 0; g < opts.gpusPerThread; ++g) {
    Slot s;
    s.rank = firstRank + g;
    s.device = s.rank % ps.deviceCount;
    PERF_CUDA(cudaSetDevice(s.device), s.rank);
    PERF_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), s.rank);
    PERF_CUDA(cudaEventCreate(&s.start), s.rank);
    PERF_CUDA(cudaEventCreate(&s.stop), s.rank);
    const size_t bytes = ps.bufBytes > 0 ? ps.bufBytes : 1;
    if (opts.localRegister) {  // as nccl-tests -R 1: memory that registrations can share
      PERF_NCCL(ncclMemAlloc((void**)&s.sendBuf, bytes), s.rank);
      PERF_NCCL(ncclMemAlloc((void**)&s.recvBuf, bytes), s.rank);
    } else {
      PERF_CUDA(cudaMalloc((void**)&s.sendBuf, bytes), s.rank);
      PERF_CUDA(cudaMalloc((void**)&s.recvBuf, bytes), s.rank);
    }
    PERF_CUDA(cudaMemset(s.sendBuf, 0, bytes), s.rank);
    PERF_CUDA(cudaMemset(s.recvBuf, 0, bytes), s.rank);
    cudaDeviceProp prop;
    PERF_CUDA(cudaGetDeviceProperties(&prop, s.device), s.rank);
    {
      std::lock_guard<std::mutex> lock(ps.printMutex);
      printf("#  Rank %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", s.rank, (int)getpid(), host, s.device,
             prop.pciDomainID, prop.pciBusID, prop.pciDeviceID, prop.name);
      fflush(stdout);
    }
    slots->push_back(std::move(s));
  }
  const int nranks = opts.nranks();
  if (opts.useInitAll()) {
    std::vector<ncclComm_t> comms(slots->size());
    std::vector<int> devs;
    for (const Slot& s : *slots) devs.push_back(s.device);
    PERF_NCCL(ncclCommInitAll(comms.data(), (int)comms.size(), devs.data()), firstRank);
    for (size_t i = 0; i < comms.size(); ++i) (*slots)[i].comm = comms[i];
  } else {
    const bool group = slots->size() > 1;
    if (group) PERF_NCCL(ncclGroupStart(), firstRank);
    for (Slot& s : *slots) {
      PERF_CUDA(cudaSetDevice(s.device), s.rank);
      PERF_NCCL(ncclCommInitRank(&s.comm, nranks, ps.id, s.rank), s.rank);
    }
    if (group) PERF_NCCL(ncclGroupEnd(), firstRank);
  }
  const size_t bytes = ps.bufBytes > 0 ? ps.bufBytes : 1;
  if (opts.localRegister == 1) {
    for (Slot& s : *slots) {
      PERF_NCCL(ncclCommRegister(s.comm, s.sendBuf, bytes, &s.sendHandle), s.rank);
      PERF_NCCL(ncclCommRegister(s.comm, s.recvBuf, bytes, &s.recvHandle), s.rank);
    }
  } else if (opts.localRegister == 2) {  // collective: one group for the ranks this thread drives
    PERF_NCCL(ncclGroupStart(), firstRank);
    for (Slot& s : *slots) {
      PERF_NCCL(ncclCommWindowRegister(s.comm, s.sendBuf, bytes, &s.sendWindow, NCCL_WIN_COLL_SYMMETRIC), s.rank);
      PERF_NCCL(ncclCommWindowRegister(s.comm, s.recvBuf, bytes, &s.recvWindow, NCCL_WIN_COLL_SYMMETRIC), s.rank);
    }
    PERF_NCCL(ncclGroupEnd(), firstRank);
  }
}

// Every result is reported by now, so a failure here is only worth a warning.
bool tearDownSlots(const Options& opts, std::vector<Slot>& slots) {
  bool ok = true;
  for (Slot& s : slots) {
    cudaSetDevice(s.device);
    ok &= cudaStreamSynchronize(s.stream) == cudaSuccess;
  }
  for (Slot& s : slots) {
    for (void* h : {s.sendHandle, s.recvHandle})
      if (h != nullptr) ok &= ncclCommDeregister(s.comm, h) == ncclSuccess;
    for (ncclWindow_t w : {s.sendWindow, s.recvWindow})
      if (w != nullptr) ok &= ncclCommWindowDeregister(s.comm, w) == ncclSuccess;
  }
  for (Slot& s : slots) {
    const ncclResult_t r = ncclCommDestroy(s.comm);
    if (r != ncclSuccess) {
      fprintf(stderr, "weft-perf: rank %d: ncclCommDestroy failed: %s\n", s.rank, ncclGetErrorString(r));
      ok = false;
    }
  }
  for (Slot& s : slots) {
    cudaSetDevice(s.device);
    if (opts.localRegister) {
      ok &= ncclMemFree(s.sendBuf) == ncclSuccess;
      ok &= ncclMemFree(s.recvBuf) == ncclSuccess;
    } else {
      ok &= cudaFree(s.sendBuf) == cudaSuccess;
      ok &= cudaFree(s.recvBuf) == cudaSuccess;
    }
    ok &= cudaEventDestroy(s.start) == cudaSuccess;
    ok &= cudaEventDestroy(s.stop) == cudaSuccess;
    ok &= cudaStreamDestroy(s.stream) == cudaSuccess;
  }
  return ok;
}

void threadMain(ProcessState& ps, int threadIndex, bool* cleanExit) {
  const Options& opts = ps.opts;
  std::vector<Slot> slots;
  setUpSlots(ps, threadIndex, &slots);
  ps.barrier.wait();
  const int localBase = threadIndex * opts.gpusPerThread;
  for (size_t k = 0; k < ps.cases.size(); ++k) {
    const Case& c = ps.cases[k];
    for (int p = 0; p < 2; ++p) {
      const bool inPlace = p == 1;
      if (inPlace && !info(c.coll).inPlace) continue;
      runPlacement(slots, opts, c, inPlace);
      for (size_t i = 0; i < slots.size(); ++i) {
        RankTimes& rt = ps.results[localBase + i];
        rt.timeUs[p] = slots[i].timeUs;
        rt.wrong[p] = slots[i].wrong;
        rt.ran[p] = true;
      }
    }
    ps.barrier.wait();
    if (threadIndex == 0) {
      PartialResult sum;
      for (RankTimes& rt : ps.results) {
        PartialResult one;
        one.ranks = 1;
        for (int p = 0; p < 2; ++p) {
          one.ran[p] = rt.ran[p];
          one.sumTimeUs[p] = one.maxTimeUs[p] = rt.timeUs[p];
          one.wrong[p] = rt.wrong[p];
        }
        combine(&sum, one);
        rt = RankTimes{};
      }
      if (!ps.sink->submit(k, sum)) fatal("reporting a result", "the reader went away", ps.processIndex);
    }
    ps.barrier.wait();
  }
  *cleanExit = tearDownSlots(opts, slots);
}

}  // namespace

int visibleGpus(bool report) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (report) {
      fprintf(stderr, "weft-perf: no CUDA GPU found (cudaGetDeviceCount: %s); nothing to benchmark\n",
              err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    }
    return 0;
  }
  return count;
}

int runProcess(const Options& opts, int processIndex, const std::vector<Case>& cases,
               const std::function<bool(ncclUniqueId*)>& getId, ResultSink* sink) {
  const int devices = visibleGpus(processIndex == 0);
  if (devices == 0) return kExitNoGpu;
  if (processIndex == 0 && opts.nranks() > devices) {
    fprintf(stderr, "weft-perf: warning: %d ranks on %d visible GPUs; ranks share GPUs\n", opts.nranks(), devices);
  }
  ProcessState ps{opts, cases, processIndex, devices, maxOperandBytes(cases, opts.nranks()), {},
                  Barrier(opts.threads), std::vector<RankTimes>(opts.ranksPerProcess()), sink, {}};
  if (!opts.useInitAll() && !getId(&ps.id)) {
    fprintf(stderr, "weft-perf: process %d could not obtain the unique id\n", processIndex);
    return kExitFailure;
  }
  std::vector<std::thread> threads;
  std::unique_ptr<bool[]> clean(new bool[opts.threads]());
  for (int t = 1; t < opts.threads; ++t) threads.emplace_back(threadMain, std::ref(ps), t, &clean[t]);
  threadMain(ps, 0, &clean[0]);
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < opts.threads; ++t) {
    if (!clean[t]) return kExitFailure;
  }
  return kExitOk;
}

bool getUniqueId(ncclUniqueId* id) {
  using Fn = ncclResult_t (*)(ncclUniqueId*);
  void* sym = dlsym(RTLD_DEFAULT, "ncclGetUniqueId");
  if (sym == nullptr) {
    fprintf(stderr, "weft-perf: the loaded libnccl does not export ncclGetUniqueId\n");
    return false;
  }
  const ncclResult_t r = reinterpret_cast<Fn>(sym)(id);
  if (r != ncclSuccess) {
    fprintf(stderr, "weft-perf: ncclGetUniqueId failed: %s; last error: %s\n", ncclGetErrorString(r),
            ncclGetLastError(nullptr));
  }
  return r == ncclSuccess;
}

void startWatchdog(int seconds, std::function<void()> onTimeout) {
  if (seconds <= 0) return;
  std::thread([seconds, onTimeout] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    if (onTimeout) onTimeout();
    fflush(stdout);
    fprintf(stderr, "weft-perf: still running after --timeout %d s; giving up\n", seconds);
    fflush(stderr);
    _exit(kExitTimeout);
  }).detach();
}

}  // namespace weft::perf
