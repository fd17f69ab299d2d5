// Abort storm (user-pains matrix row 9): communicators made and aborted over and over, one process
// per rank, each rank aborting at a random moment of its own, so that aborts land during creation,
// while kernels wait for peers that will never call, and from another thread. Every iteration:
//   abort-busy    blocking creation; each rank queues a random number (0-6) of all_reduces of
//                 random sizes, so kernels wait for peers that stop short; abort after 0-5 ms
//   abort-init    non-blocking creation (config.blocking = 0), aborted after 0-20 ms, often
//                 while ncclCommGetAsyncError still says ncclInProgress
//   group-abort   blocking creation and ncclCommSplit; work queued on both; both aborted in one
//                 ncclGroupStart/ncclGroupEnd
//   thread-abort  blocking creation; the main thread waits in cudaStreamSynchronize while another
//                 thread aborts after 0-5 ms
// Checked: every ncclCommAbort returns within kAbortLimitSeconds and the stream drains after it;
// open file descriptors, threads and free GPU memory do not grow (measured after the first
// iterations and at the end); no /dev/shm page of weft is left behind; at the end a fresh
// communicator gives a checked all_reduce.
//   weft_gpu_abort_storm_test [-n ranks (2)] [-g gpus (1)] [-s seconds (60)] [--iterations N] [--seed S]
// Uses only nccl.h. Ranks sharing a GPU need weft's NCCL_WEFT_ALLOW_GPU_SHARING=1 (set when -n > -g);
// NCCL_RUNTIME_CONNECT=0 unless set (see main).
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fd_io.h"
#include "nccl.h"
#include "process_usage.h"

namespace {

constexpr double kAbortLimitSeconds = 2;  // one ncclCommAbort, and the stream's drain after it
constexpr size_t kMaxFloats = 1 << 20;    // the largest all_reduce of the storm (4 MiB)
constexpr int kWarmIterations = 8;        // resources are measured after these
constexpr int kFdSlack = 4, kThreadSlack = 2;
constexpr double kSettleSeconds = 15;  // longer than a failed root lingers (bootstrap/root.cc)
constexpr size_t kGpuMemorySlack = 256u << 20;
constexpr int kModes = 4;
const char* kModeNames[kModes] = {"abort-busy", "abort-init", "group-abort", "thread-abort"};

// Where each rank is, for the report of a hang (the alarm's handler prints it).
volatile sig_atomic_t gRank = -1, gIteration = -1;
const char* volatile gStage = "start";

void onAlarm(int) {
  char line[200];
  const int n = snprintf(line, sizeof(line), "FAIL rank %d hung in iteration %d, %s (mode %s)\n", (int)gRank,
                         (int)gIteration, gStage, gIteration >= 0 ? kModeNames[gIteration % kModes] : "-");
  if (n > 0 && write(STDOUT_FILENO, line, (size_t)n) < 0) _exit(15);
  _exit(14);
}

void stage(const char* what) { gStage = what; }

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

using gpu_test::countEntries;

struct Options {
  int nranks = 2, gpus = 1, iterations = 0;
  double seconds = 60;
  unsigned seed = 0;
};

// One rank's process. Iterations run in lockstep: each rank tells rank 0 it is ready (toRoot) and
// gets the next unique id from it (fromRoot); an id of all zero bytes ends the storm.
struct Rank {
  Options opt;
  int rank = 0, dev = 0;
  int toRoot = -1, fromRoot = -1;    // ranks > 0
  std::vector<int> readyFrom, idTo;  // rank 0: one per other rank
  std::mt19937 rng;
  cudaStream_t stream = nullptr;
  float* buf = nullptr;
  int failures = 0;
  double worstAbort = 0, worstDrain = 0;
  int aborts = 0;

  void fail(int iteration, const char* mode, const std::string& what) {
    if (failures < 10) std::printf("FAIL rank %d iteration %d (%s): %s\n", rank, iteration, mode, what.c_str());
    std::fflush(stdout);
    ++failures;
  }
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

  // The lockstep: false when the storm is over.
  bool nextId(bool more, ncclUniqueId* id) {
    char ready = 1;
    if (rank > 0)
      return writeAll(toRoot, &ready, 1) && readAll(fromRoot, id, sizeof(*id)) &&
             std::any_of(id->internal, id->internal + sizeof(id->internal), [](char c) { return c != 0; });
    for (int fd : readyFrom)
      if (!readAll(fd, &ready, 1)) return false;
    memset(id, 0, sizeof(*id));
    if (more && ncclGetUniqueId(id) != ncclSuccess) return false;
    for (int fd : idTo)
      if (!writeAll(fd, id, sizeof(*id))) return false;
    return more;
  }

  // Queues a random number (0-6) of all_reduces. Their sizes are the iteration's, the same on
  // every rank (calls that differ between ranks are refused: not what this test is about); only
  // how many each rank makes differs, so kernels wait for peers that stop short.
  void queueWork(ncclComm_t comm, int iteration) {
    const int calls = uniform(0, 6);
    std::mt19937 shared(opt.seed ^ (0x9e3779b9u * (unsigned)(iteration + 1)));
    for (int c = 0; c < calls; ++c) {
      const size_t count = (size_t)1 << std::uniform_int_distribution<int>(8, 20)(shared);
      stage("ncclAllReduce");
      if (ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream) != ncclSuccess)
        return;  // may fail: a peer went
    }
  }

  void timedAbort(int iteration, const char* mode, ncclComm_t comm) {
    stage("ncclCommAbort");
    const double t0 = now();
    const ncclResult_t r = ncclCommAbort(comm);
    const double took = now() - t0;
    worstAbort = std::max(worstAbort, took);
    ++aborts;
    if (r != ncclSuccess) fail(iteration, mode, std::string("ncclCommAbort returned ") + ncclGetErrorString(r));
    if (took > kAbortLimitSeconds) fail(iteration, mode, "ncclCommAbort took " + std::to_string(took) + " s");
  }

  void drain(int iteration, const char* mode) {
    stage("the stream's drain after the abort");
    const double t0 = now();
    cudaError_t q = cudaStreamQuery(stream);
    while (q == cudaErrorNotReady && now() - t0 < kAbortLimitSeconds) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      q = cudaStreamQuery(stream);
    }
    worstDrain = std::max(worstDrain, now() - t0);
    if (q != cudaSuccess)
      fail(iteration, mode, std::string("the stream did not drain after the abort: ") + cudaGetErrorString(q));
  }

  void iterate(int iteration, const ncclUniqueId& id) {
    const int mode = iteration % kModes;
    const char* name = kModeNames[mode];
    ncclComm_t comm = nullptr;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = mode == 1 ? 0 : 1;
    gIteration = iteration;
    stage("ncclCommInitRankConfig");
    ncclResult_t r = ncclCommInitRankConfig(&comm, opt.nranks, id, rank, &config);
    if (mode == 1) {
      if (r != ncclSuccess && r != ncclInProgress)
        return fail(iteration, name, std::string("init: ") + ncclGetErrorString(r));
      std::this_thread::sleep_for(std::chrono::milliseconds(uniform(0, 20)));
      return timedAbort(iteration, name, comm);
    }
    if (r != ncclSuccess) {  // every rank creates before any aborts in these modes
      fail(iteration, name,
           std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr));
      if (comm) timedAbort(iteration, name, comm);
      return;
    }
    if (mode == 2) {
      ncclComm_t child = nullptr;
      stage("ncclCommSplit");
      r = ncclCommSplit(comm, 0, rank, &child, nullptr);
      if (r == ncclSuccess && child) queueWork(child, iteration);
      queueWork(comm, iteration);
      std::this_thread::sleep_for(std::chrono::microseconds(uniform(0, 5000)));
      stage("the group abort");
      const double t0 = now();
      ncclGroupStart();
      if (child) ncclCommAbort(child);
      ncclCommAbort(comm);
      const ncclResult_t g = ncclGroupEnd();
      const double took = now() - t0;
      worstAbort = std::max(worstAbort, took);
      aborts += 2;
      if (g != ncclSuccess) fail(iteration, name, std::string("ncclGroupEnd of the aborts: ") + ncclGetErrorString(g));
      if (took > kAbortLimitSeconds) fail(iteration, name, "the group abort took " + std::to_string(took) + " s");
      return drain(iteration, name);
    }
    queueWork(comm, iteration);
    if (mode == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(uniform(0, 5000)));
      timedAbort(iteration, name, comm);
      return drain(iteration, name);
    }
    // thread-abort: the main thread waits on the stream, another thread aborts.
    const int delayUs = uniform(0, 5000);
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
      timedAbort(iteration, name, comm);
    });
    stage("cudaStreamSynchronize while another thread aborts");
    const double t0 = now();
    const cudaError_t e = cudaStreamSynchronize(stream);
    aborter.join();
    if (e != cudaSuccess) fail(iteration, name, std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e));
    worstDrain = std::max(worstDrain, now() - t0 - delayUs * 1e-6);
  }

  using Usage = gpu_test::ProcessUsage;
  static Usage usage() { return gpu_test::processUsage(); }

  // A fresh communicator after the storm, checked.
  void finalCheck(const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, opt.nranks, id, rank) != ncclSuccess)
      return fail(-1, "final", "ncclCommInitRank failed");
    std::vector<float> host(kMaxFloats, (float)(rank + 1));
    cudaMemcpyAsync(buf, host.data(), kMaxFloats * sizeof(float), cudaMemcpyHostToDevice, stream);
    ncclResult_t r = ncclAllReduce(buf, buf, kMaxFloats, ncclFloat, ncclSum, comm, stream);
    if (r != ncclSuccess || cudaStreamSynchronize(stream) != cudaSuccess) return fail(-1, "final", "all_reduce failed");
    cudaMemcpy(host.data(), buf, kMaxFloats * sizeof(float), cudaMemcpyDeviceToHost);
    const float want = (float)opt.nranks * (opt.nranks + 1) / 2;
    for (size_t i = 0; i < kMaxFloats; ++i)
      if (host[i] != want) return fail(-1, "final", "element " + std::to_string(i) + " is " + std::to_string(host[i]));
    if (ncclCommDestroy(comm) != ncclSuccess) fail(-1, "final", "ncclCommDestroy failed");
  }

  int run() {
    gRank = rank;
    signal(SIGALRM, onAlarm);
    signal(SIGPIPE, SIG_IGN);           // a rank that left early closed its pipe: a write then fails, no more
    alarm((unsigned)opt.seconds + 60);  // a hang ends the process, naming where it was
    rng.seed(opt.seed + 7919u * (unsigned)rank);
    cudaSetDevice(dev);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaMalloc(&buf, kMaxFloats * sizeof(float));
    cudaMemset(buf, 0, kMaxFloats * sizeof(float));
    Usage warm{};
    const double end = now() + opt.seconds;
    int iteration = 0;
    ncclUniqueId id;
    for (;; ++iteration) {
      const bool more = opt.iterations > 0 ? iteration < opt.iterations : now() < end;
      stage("the lockstep with rank 0");
      if (!nextId(more, &id)) break;
      if (rank == 0 && iteration % 100 == 0) {
        std::printf("rank 0: iteration %d\n", iteration);
        std::fflush(stdout);
      }
      iterate(iteration, id);
      stage("cudaDeviceSynchronize after the iteration");
      const cudaError_t sticky = cudaDeviceSynchronize();
      if (sticky != cudaSuccess) {  // the context is unusable: report it and leave the storm
        fail(iteration, kModeNames[iteration % kModes], std::string("after the abort: ") + cudaGetErrorString(sticky));
        return 1;
      }
      if (iteration + 1 == kWarmIterations) warm = usage();
    }
    cudaDeviceSynchronize();
    // A root whose rendezvous failed answers late ranks for a while before it ends (bootstrap/root.h:
    // kFailedLingerMs, 10 s): resources released within that bound are not leaks.
    const double settleFrom = now();
    Usage last = usage();
    while ((last.fds > warm.fds + kFdSlack || last.threads > warm.threads + kThreadSlack) &&
           now() - settleFrom < kSettleSeconds) {
      usleep(200 * 1000);
      last = usage();
    }
    const double settled = now() - settleFrom;
    // The fresh communicator (rank 0 decides one more id for it).
    if (rank == 0) {
      ncclGetUniqueId(&id);
      for (int fd : idTo) writeAll(fd, &id, sizeof(id));
    } else if (!readAll(fromRoot, &id, sizeof(id))) {
      fail(-1, "final", "no id for the final communicator");
      return 1;
    }
    stage("the final communicator");
    finalCheck(id);
    if (iteration > kWarmIterations) {
      if (last.fds > warm.fds + kFdSlack)
        fail(-1, "usage", "open fds grew from " + std::to_string(warm.fds) + " to " + std::to_string(last.fds));
      if (last.threads > warm.threads + kThreadSlack)
        fail(-1, "usage", "threads grew from " + std::to_string(warm.threads) + " to " + std::to_string(last.threads));
      if (last.freeGpu + kGpuMemorySlack < warm.freeGpu)
        fail(-1, "usage", "free GPU memory fell by " + std::to_string((warm.freeGpu - last.freeGpu) >> 20) + " MiB");
    }
    std::printf(
        "rank %d: %d iterations, %d aborts, worst abort %.1f ms, worst drain %.1f ms; fds %d -> %d, threads %d -> %d "
        "(settled in %.1f s), free GPU memory %zu -> %zu MiB; %s\n",
        rank, iteration, aborts, worstAbort * 1e3, worstDrain * 1e3, warm.fds, last.fds, warm.threads, last.threads,
        settled,
        warm.freeGpu >> 20, last.freeGpu >> 20, failures ? "FAIL" : "PASS");
    std::fflush(stdout);
    return failures ? 1 : 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  opt.seed = (unsigned)std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "-n" && more)
      opt.nranks = atoi(argv[++i]);
    else if (a == "-g" && more)
      opt.gpus = atoi(argv[++i]);
    else if (a == "-s" && more)
      opt.seconds = atof(argv[++i]);
    else if (a == "--iterations" && more)
      opt.iterations = atoi(argv[++i]);
    else if (a == "--seed" && more)
      opt.seed = (unsigned)strtoul(argv[++i], nullptr, 0);
    else {
      std::fprintf(stderr, "usage: %s [-n ranks] [-g gpus] [-s seconds] [--iterations N] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  if (opt.nranks < 1 || opt.gpus < 1) return 2;
  if (opt.nranks > opt.gpus) setenv("NCCL_WEFT_ALLOW_GPU_SHARING", "1", 1);
  // Connections made at creation: a call that makes one on first use waits for its peer, and a
  // peer that stops short of the call (as here, on purpose) would hold it until NCCL_BOOTSTRAP_TIMEOUT,
  // with no abort able to come from this thread.
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  const int shmBefore = countEntries("/dev/shm", "weft-");
  std::printf("abort storm: %d ranks on %d GPUs, %s, seed %u\n", opt.nranks, opt.gpus,
              opt.iterations > 0 ? (std::to_string(opt.iterations) + " iterations").c_str()
                                 : (std::to_string(opt.seconds) + " s").c_str(),
              opt.seed);
  std::fflush(stdout);
  std::vector<Rank> ranks(opt.nranks);
  for (int r = 0; r < opt.nranks; ++r) {
    ranks[r].opt = opt;
    ranks[r].rank = r;
    ranks[r].dev = r % opt.gpus;
  }
  for (int r = 1; r < opt.nranks; ++r) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) return 2;
    ranks[r].toRoot = up[1];
    ranks[0].readyFrom.push_back(up[0]);
    ranks[r].fromRoot = down[0];
    ranks[0].idTo.push_back(down[1]);
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < opt.nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(ranks[r].run());
    pids.push_back(pid);
  }
  int failed = 0;
  for (int r = 0; r < opt.nranks; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 14) std::printf("FAIL rank %d hung (its line says where)\n", r);
    if (WIFSIGNALED(status)) {
      std::printf("FAIL rank %d died of signal %d (%s)\n", r, WTERMSIG(status),
                  WTERMSIG(status) == SIGALRM ? "a hang" : strsignal(WTERMSIG(status)));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  const int shmAfter = countEntries("/dev/shm", "weft-");
  if (shmAfter > shmBefore) {
    std::printf("FAIL %d weft pages left in /dev/shm (%d before)\n", shmAfter - shmBefore, shmBefore);
    ++failed;
  }
  std::printf("abort storm: %s\n", failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}
