// Soak (user-pains matrix row 3): one process per rank runs cycles of checked collectives for -s
// seconds and looks for drift. Each cycle, the same on every rank (a shared seed):
//   - 12 collectives of random kind (all_reduce, broadcast, reduce, all_gather, reduce_scatter,
//     all_to_all, a ring of sends and receives), count (0, tiny, odd, up to 1 Mi ints per rank),
//     root, in or out of place and an element offset, on the communicator of all ranks; int32
//     data that differs per call, outputs poisoned first, every element checked (nccl-tests' -c 1);
//   - three replays of a CUDA graph of an all_reduce captured at the start, checked (captured and
//     eager launches mixed);
//   - every 8th cycle a ncclCommSplit (all ranks, or odd and even, keys reversed) checked with an
//     all_reduce and an all_gather (which shows the rank order), then destroyed; 4 cycles later a
//     new communicator from a unique id that rank 0 broadcasts over the first one, checked, then
//     ncclCommFinalize and ncclCommDestroy;
//   - a latency probe: 32 all_reduces of 2 ints, the time per call.
// Drift is judged from samples taken after kWarmCycles cycles, at the midpoint and at the end:
// open fds and threads may not grow (small slack), resident memory and the GPU's free memory may
// not move by more than a bound over the second half, nor the probe's median time creep up.
//   weft_gpu_soak_test [-n ranks (2)] [-g gpus (1)] [-s seconds (60)] [--seed S] [--report seconds (10)]
// Uses only nccl.h. Ranks sharing a GPU need weft's NCCL_WEFT_ALLOW_GPU_SHARING=1 (set when -n > -g).
// WEFT_TEST_HOSTS=H: the ranks pose as H hosts (test_hosts.h), so the network transport soaks too.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "fork_ranks.h"
#include "nccl.h"
#include "process_usage.h"
#include "test_hosts.h"

namespace {

constexpr size_t kMaxCount = 1 << 20;  // ints per rank and call
constexpr size_t kSlack = 8;           // elements past the largest buffer use (offsets)
constexpr int kOpsPerCycle = 12;
constexpr int kGraphReplays = 3;
constexpr size_t kGraphCount = 4099;
constexpr int kProbeCalls = 32;
constexpr int kWarmCycles = 16;
constexpr int kFdSlack = 4, kThreadSlack = 2;
constexpr long kRssSlackKiB = 16 << 10;           // over the second half
constexpr size_t kGpuMemorySlack = 128u << 20;    // over the second half, all processes together
constexpr double kCreepFactor = 1.5, kCreepFloorUs = 10;
constexpr double kSettleSeconds = 15;

enum class Op { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, SendRecv };
const char* kOpNames[] = {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all",
                          "sendrecv"};
constexpr int kOps = 7;

volatile sig_atomic_t gRank = -1, gCycle = -1;
const char* volatile gStage = "start";
void onAlarm(int) {
  char line[200];
  const int n = snprintf(line, sizeof(line), "FAIL rank %d hung in cycle %d, %s\n", (int)gRank, (int)gCycle, gStage);
  if (n > 0 && write(STDOUT_FILENO, line, (size_t)n) < 0) _exit(15);
  _exit(14);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The value rank r puts at element i of a call salted `salt`: positive, distinct per call, and
// the sum over 8 ranks fits an int32.
int32_t value(int r, size_t i, uint32_t salt) {
  return (r + 1) * 100000 + (int32_t)(((uint32_t)i * 2654435761u + salt * 40503u) % 50000u);
}

struct Options {
  int nranks = 2, gpus = 1;
  double seconds = 60, reportEvery = 10;
  unsigned seed = 0;
};

struct Sample {
  int cycle = 0;
  gpu_test::ProcessUsage usage;
  double probeUs = 0;
};

struct Rank {
  Options opt;
  int rank = 0, dev = 0;
  cudaStream_t stream = nullptr;
  int32_t *send = nullptr, *recv = nullptr, *gsend = nullptr, *grecv = nullptr, *small = nullptr;
  std::vector<int32_t> hostIn, hostOut;
  cudaGraphExec_t graph = nullptr;
  ncclComm_t world = nullptr;  // the communicator of all ranks
  int failures = 0;
  long checked = 0, calls = 0;

  void fail(int cycle, const std::string& what) {
    if (failures < 10) std::printf("FAIL rank %d cycle %d: %s\n", rank, cycle, what.c_str());
    std::fflush(stdout);
    ++failures;
  }
  [[noreturn]] void fatal(int cycle, const std::string& what) {
    fail(cycle, what);
    _exit(1);
  }
  void must(ncclResult_t r, int cycle, const char* what) {
    if (r != ncclSuccess) fatal(cycle, std::string(what) + ": " + ncclGetErrorString(r));
  }
  void sync(int cycle, const char* what) {
    gStage = what;
    const cudaError_t e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) fatal(cycle, std::string(what) + ": " + cudaGetErrorString(e));
  }

  // Fills `n` device ints at `dst` with value(rank, first + i, salt).
  void fill(int32_t* dst, size_t first, size_t n, uint32_t salt) {
    for (size_t i = 0; i < n; ++i) hostIn[i] = value(rank, first + i, salt);
    cudaMemcpyAsync(dst, hostIn.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream);
  }
  // Reads `n` ints at `src` and compares element i with want(i); one failure line per call.
  template <typename Want>
  void expect(int cycle, const std::string& call, const int32_t* src, size_t n, Want want) {
    cudaMemcpyAsync(hostOut.data(), src, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream);
    sync(cycle, "reading a result back");
    checked += (long)n;
    for (size_t i = 0; i < n; ++i) {
      const int32_t w = want(i);
      if (hostOut[i] != w) {
        return fail(cycle, call + ": element " + std::to_string(i) + " is " + std::to_string(hostOut[i]) + ", want " +
                               std::to_string(w));
      }
    }
  }

  int32_t sumOver(size_t i, uint32_t salt) const {
    int32_t s = 0;
    for (int r = 0; r < opt.nranks; ++r) s += value(r, i, salt);
    return s;
  }

  // One random collective on `comm`, checked. `shared` draws the same on every rank.
  void randomCall(ncclComm_t comm, int cycle, int index, std::mt19937& shared) {
    const int n = opt.nranks;
    const Op op = (Op)std::uniform_int_distribution<int>(0, kOps - 1)(shared);
    const int sizeClass = std::uniform_int_distribution<int>(0, 9)(shared);
    size_t count = sizeClass == 0   ? 0
                   : sizeClass < 3  ? std::uniform_int_distribution<size_t>(1, 64)(shared)
                   : sizeClass < 7  ? std::uniform_int_distribution<size_t>(65, 1 << 16)(shared)
                                    : std::uniform_int_distribution<size_t>((1 << 16) + 1, kMaxCount)(shared);
    const int root = std::uniform_int_distribution<int>(0, n - 1)(shared);
    const bool inPlace = op != Op::AlltoAll && op != Op::SendRecv && std::uniform_int_distribution<int>(0, 1)(shared);
    const size_t offset = std::uniform_int_distribution<size_t>(0, 3)(shared);
    const uint32_t salt = (uint32_t)cycle * 131u + (uint32_t)index;
    const std::string call = std::string(kOpNames[(int)op]) + "(count " + std::to_string(count) + ", root " +
                             std::to_string(root) + (inPlace ? ", in place" : "") + ", offset " + std::to_string(offset) + ")";
    int32_t* in = send + offset;
    int32_t* out = recv + offset;
    gStage = kOpNames[(int)op];
    cudaMemsetAsync(recv, 0xff, (n * kMaxCount + kSlack) * sizeof(int32_t), stream);  // -1: never a valid value
    const size_t prev = (size_t)((rank + n - 1) % n);
    ncclResult_t r = ncclSuccess;
    switch (op) {
      case Op::AllReduce:
        if (inPlace) out = in;
        fill(in, 0, count, salt);
        r = ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, stream);
        break;
      case Op::Broadcast:
        if (inPlace) out = in;
        fill(in, 0, count, salt);
        r = ncclBroadcast(in, out, count, ncclInt32, root, comm, stream);
        break;
      case Op::Reduce:
        if (inPlace) out = in;
        fill(in, 0, count, salt);
        r = ncclReduce(in, out, count, ncclInt32, ncclSum, root, comm, stream);
        break;
      case Op::AllGather:
        if (inPlace) in = out + rank * count;
        fill(in, 0, count, salt);
        r = ncclAllGather(in, out, count, ncclInt32, comm, stream);
        break;
      case Op::ReduceScatter:
        if (inPlace) out = in + rank * count;
        fill(in, 0, n * count, salt);
        r = ncclReduceScatter(in, out, count, ncclInt32, ncclSum, comm, stream);
        break;
      case Op::AlltoAll:
        fill(in, 0, n * count, salt);
        r = ncclAlltoAll(in, out, count, ncclInt32, comm, stream);
        break;
      case Op::SendRecv:
        fill(in, 0, count, salt);
        ncclGroupStart();
        ncclSend(in, count, ncclInt32, (rank + 1) % n, comm, stream);
        ncclRecv(out, count, ncclInt32, (int)prev, comm, stream);
        r = ncclGroupEnd();
        break;
    }
    must(r, cycle, call.c_str());
    ++calls;
    switch (op) {
      case Op::AllReduce: return expect(cycle, call, out, count, [&](size_t i) { return sumOver(i, salt); });
      case Op::Broadcast: return expect(cycle, call, out, count, [&](size_t i) { return value(root, i, salt); });
      case Op::Reduce:
        if (rank == root) expect(cycle, call, out, count, [&](size_t i) { return sumOver(i, salt); });
        return sync(cycle, "reduce");
      case Op::AllGather:
        return expect(cycle, call, out, n * count, [&](size_t i) { return value((int)(i / count), i % count, salt); });
      case Op::ReduceScatter:
        return expect(cycle, call, out, count, [&](size_t i) { return sumOver(rank * count + i, salt); });
      case Op::AlltoAll:
        return expect(cycle, call, out, n * count,
                      [&](size_t i) { return value((int)(i / count), rank * count + i % count, salt); });
      case Op::SendRecv: return expect(cycle, call, out, count, [&](size_t i) { return value((int)prev, i, salt); });
    }
  }

  void captureGraph() {
    cudaGraph_t g;
    gStage = "capturing the graph";
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    const ncclResult_t r = ncclAllReduce(gsend, grecv, kGraphCount, ncclInt32, ncclSum, world, stream);
    if (cudaStreamEndCapture(stream, &g) != cudaSuccess || r != ncclSuccess) fatal(-1, "capturing an all_reduce");
    if (cudaGraphInstantiate(&graph, g, 0) != cudaSuccess) fatal(-1, "cudaGraphInstantiate");
    cudaGraphDestroy(g);
  }

  void replayGraph(int cycle) {
    const uint32_t salt = 0x51000000u + (uint32_t)cycle;
    fill(gsend, 0, kGraphCount, salt);
    cudaMemsetAsync(grecv, 0xff, kGraphCount * sizeof(int32_t), stream);
    gStage = "graph replays";
    for (int k = 0; k < kGraphReplays; ++k) {
      if (cudaGraphLaunch(graph, stream) != cudaSuccess) fatal(cycle, "cudaGraphLaunch");
    }
    calls += kGraphReplays;
    expect(cycle, "graph replay of all_reduce(count 4099)", grecv, kGraphCount,
           [&](size_t i) { return sumOver(i, salt); });
  }

  // A split of the communicator of all ranks (everyone, or odd and even), keys reversed.
  void splitCycle(int cycle, std::mt19937& shared) {
    const bool byParity = std::uniform_int_distribution<int>(0, 1)(shared) == 1 && opt.nranks > 1;
    std::vector<int> members;  // world ranks in child order: keys n - r, so descending
    for (int r = opt.nranks - 1; r >= 0; --r) {
      if (!byParity || r % 2 == rank % 2) members.push_back(r);
    }
    const int want = (int)(std::find(members.begin(), members.end(), rank) - members.begin());
    ncclComm_t child = nullptr;
    gStage = "ncclCommSplit";
    must(ncclCommSplit(world, byParity ? rank % 2 : 0, opt.nranks - rank, &child, nullptr), cycle, "ncclCommSplit");
    int size = 0, me = -1;
    ncclCommCount(child, &size);
    ncclCommUserRank(child, &me);
    if (size != (int)members.size() || me != want) {
      fail(cycle, "split: " + std::to_string(size) + " ranks, this one rank " + std::to_string(me) + "; want " +
                      std::to_string(members.size()) + " and " + std::to_string(want));
    }
    const size_t count = 5003;
    const uint32_t salt = 0x52000000u + (uint32_t)cycle;
    fill(send, 0, count, salt);
    must(ncclAllReduce(send, recv, count, ncclInt32, ncclSum, child, stream), cycle, "all_reduce on the split");
    expect(cycle, "all_reduce on the split", recv, count, [&](size_t i) {
      int32_t s = 0;
      for (int m : members) s += value(m, i, salt);
      return s;
    });
    must(ncclAllGather(send, recv, count, ncclInt32, child, stream), cycle, "all_gather on the split");
    expect(cycle, "all_gather on the split", recv, members.size() * count,
           [&](size_t i) { return value(members[i / count], i % count, salt); });
    calls += 2;
    gStage = "ncclCommDestroy of the split";
    must(ncclCommDestroy(child), cycle, "ncclCommDestroy of the split");
  }

  // A new communicator of all ranks from an id that rank 0 makes and broadcasts over `world`.
  void freshCycle(int cycle) {
    ncclUniqueId id{};
    if (rank == 0) must(ncclGetUniqueId(&id), cycle, "ncclGetUniqueId");
    char* bytes = reinterpret_cast<char*>(small);
    cudaMemcpyAsync(bytes, &id, sizeof(id), cudaMemcpyHostToDevice, stream);
    must(ncclBroadcast(bytes, bytes, sizeof(id), ncclChar, 0, world, stream), cycle, "broadcast of the unique id");
    cudaMemcpyAsync(&id, bytes, sizeof(id), cudaMemcpyDeviceToHost, stream);
    sync(cycle, "the unique id's broadcast");
    ncclComm_t fresh = nullptr;
    gStage = "ncclCommInitRank of a new communicator";
    must(ncclCommInitRank(&fresh, opt.nranks, id, rank), cycle, "ncclCommInitRank");
    const size_t count = 70001;
    const uint32_t salt = 0x53000000u + (uint32_t)cycle;
    fill(send, 0, count, salt);
    must(ncclAllReduce(send, recv, count, ncclInt32, ncclSum, fresh, stream), cycle, "all_reduce on the new one");
    expect(cycle, "all_reduce on a new communicator", recv, count, [&](size_t i) { return sumOver(i, salt); });
    ++calls;
    gStage = "ncclCommFinalize";
    must(ncclCommFinalize(fresh), cycle, "ncclCommFinalize");
    must(ncclCommDestroy(fresh), cycle, "ncclCommDestroy");
  }

  // Microseconds per small all_reduce over kProbeCalls back to back.
  double probe(int cycle) {
    sync(cycle, "before the probe");
    const double t0 = now();
    for (int k = 0; k < kProbeCalls; ++k) must(ncclAllReduce(small, small, 2, ncclInt32, ncclMax, world, stream), cycle, "probe");
    sync(cycle, "the probe");
    calls += kProbeCalls;
    return (now() - t0) * 1e6 / kProbeCalls;
  }

  // Whether any rank's time is up (an all_reduce of the ranks' flags), so all stop together.
  bool anyDone(int cycle, bool mine) {
    int32_t flag = mine ? 1 : 0;
    cudaMemcpyAsync(small + 4, &flag, sizeof(flag), cudaMemcpyHostToDevice, stream);
    must(ncclAllReduce(small + 4, small + 4, 1, ncclInt32, ncclMax, world, stream), cycle, "the stop flag");
    cudaMemcpyAsync(&flag, small + 4, sizeof(flag), cudaMemcpyDeviceToHost, stream);
    sync(cycle, "the stop flag");
    return flag != 0;
  }

  static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }

  void judge(const std::vector<Sample>& samples) {
    const int cycles = (int)samples.size();
    if (cycles < 2 * kWarmCycles) {
      std::printf("rank %d: only %d cycles: too few to judge drift (needs %d)\n", rank, cycles, 2 * kWarmCycles);
      return;
    }
    const Sample& warm = samples[kWarmCycles - 1];
    const Sample& mid = samples[(kWarmCycles + cycles) / 2];
    gpu_test::ProcessUsage last = samples.back().usage;
    // Threads and fds of a destroyed communicator may take a moment to go (its root, its proxy).
    for (const double t0 = now(); (last.fds > warm.usage.fds + kFdSlack || last.threads > warm.usage.threads + kThreadSlack) &&
                                  now() - t0 < kSettleSeconds;) {
      usleep(200 * 1000);
      last = gpu_test::processUsage();
    }
    if (last.fds > warm.usage.fds + kFdSlack)
      fail(-1, "open fds grew from " + std::to_string(warm.usage.fds) + " to " + std::to_string(last.fds));
    if (last.threads > warm.usage.threads + kThreadSlack)
      fail(-1, "threads grew from " + std::to_string(warm.usage.threads) + " to " + std::to_string(last.threads));
    if (last.rssKiB > mid.usage.rssKiB + kRssSlackKiB)
      fail(-1, "resident memory grew from " + std::to_string(mid.usage.rssKiB >> 10) + " MiB at cycle " +
                   std::to_string(mid.cycle) + " to " + std::to_string(last.rssKiB >> 10) + " MiB");
    if (last.freeGpu + kGpuMemorySlack < mid.usage.freeGpu)
      fail(-1, "free GPU memory fell from " + std::to_string(mid.usage.freeGpu >> 20) + " MiB at cycle " +
                   std::to_string(mid.cycle) + " to " + std::to_string(last.freeGpu >> 20) + " MiB");
    const int window = std::max(kWarmCycles, (cycles - kWarmCycles) / 5);
    std::vector<double> early, late;
    for (int c = kWarmCycles; c < kWarmCycles + window && c < cycles; ++c) early.push_back(samples[c].probeUs);
    for (int c = std::max(kWarmCycles, cycles - window); c < cycles; ++c) late.push_back(samples[c].probeUs);
    const double e = median(early), l = median(late);
    if (l > kCreepFactor * e + kCreepFloorUs)
      fail(-1, "the probe's all_reduce crept from " + std::to_string(e) + " to " + std::to_string(l) + " us");
    std::printf("rank %d: %d cycles, %ld calls, %ld elements checked; fds %d -> %d, threads %d -> %d, resident %ld -> "
                "%ld -> %ld MiB, free GPU %zu -> %zu -> %zu MiB, probe median %.1f -> %.1f us; %s\n",
                rank, cycles, calls, checked, warm.usage.fds, last.fds, warm.usage.threads, last.threads,
                warm.usage.rssKiB >> 10, mid.usage.rssKiB >> 10, last.rssKiB >> 10, warm.usage.freeGpu >> 20,
                mid.usage.freeGpu >> 20, last.freeGpu >> 20, e, l, failures ? "FAIL" : "PASS");
  }

  int run(const ncclUniqueId& id) {
    gRank = rank;
    signal(SIGALRM, onAlarm);
    alarm((unsigned)opt.seconds + 120);
    cudaSetDevice(dev);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    const size_t elems = opt.nranks * kMaxCount + kSlack;
    if (cudaMalloc(&send, elems * sizeof(int32_t)) != cudaSuccess || cudaMalloc(&recv, elems * sizeof(int32_t)) != cudaSuccess ||
        cudaMalloc(&gsend, kGraphCount * sizeof(int32_t)) != cudaSuccess ||
        cudaMalloc(&grecv, kGraphCount * sizeof(int32_t)) != cudaSuccess || cudaMalloc(&small, 256) != cudaSuccess) {
      fatal(-1, "cudaMalloc");
    }
    cudaMemset(small, 0, 256);
    hostIn.resize(elems);  // made once: the test's own memory stays flat
    hostOut.resize(elems);
    gStage = "ncclCommInitRank";
    must(ncclCommInitRank(&world, opt.nranks, id, rank), -1, "ncclCommInitRank");
    captureGraph();
    std::vector<Sample> samples;
    const double start = now(), end = start + opt.seconds;
    double nextReport = start + opt.reportEvery;
    for (int cycle = 0;; ++cycle) {
      gCycle = cycle;
      std::mt19937 shared(opt.seed ^ (0x9e3779b9u * (unsigned)(cycle + 1)));
      for (int k = 0; k < kOpsPerCycle; ++k) randomCall(world, cycle, k, shared);
      replayGraph(cycle);
      if (cycle % 8 == 3) splitCycle(cycle, shared);
      if (cycle % 8 == 7) freshCycle(cycle);
      Sample s;
      s.cycle = cycle;
      s.probeUs = probe(cycle);
      s.usage = gpu_test::processUsage();
      samples.push_back(s);
      if (rank == 0 && now() >= nextReport) {
        nextReport += opt.reportEvery;
        std::printf("rank 0: %.0f s, cycle %d, %ld calls: fds %d, threads %d, resident %ld MiB, free GPU %zu MiB, "
                    "probe %.1f us\n", now() - start, cycle, calls, s.usage.fds, s.usage.threads, s.usage.rssKiB >> 10,
                    s.usage.freeGpu >> 20, s.probeUs);
        std::fflush(stdout);
      }
      if (anyDone(cycle, now() >= end) || failures > 0) break;
    }
    gStage = "the end";
    cudaGraphExecDestroy(graph);
    must(ncclCommDestroy(world), -1, "ncclCommDestroy");
    judge(samples);
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
    if (a == "-n" && more) opt.nranks = atoi(argv[++i]);
    else if (a == "-g" && more) opt.gpus = atoi(argv[++i]);
    else if (a == "-s" && more) opt.seconds = atof(argv[++i]);
    else if (a == "--report" && more) opt.reportEvery = atof(argv[++i]);
    else if (a == "--seed" && more) opt.seed = (unsigned)strtoul(argv[++i], nullptr, 0);
    else {
      std::fprintf(stderr, "usage: %s [-n ranks] [-g gpus] [-s seconds] [--seed S] [--report seconds]\n", argv[0]);
      return 2;
    }
  }
  if (opt.nranks < 1 || opt.nranks > 8 || opt.gpus < 1 || opt.seconds <= 0) {
    return std::fprintf(stderr, "need 1 <= -n <= 8, -g >= 1, -s > 0\n"), 2;
  }
  if (opt.nranks > opt.gpus) setenv("NCCL_WEFT_ALLOW_GPU_SHARING", "1", 1);
  std::printf("soak: %d ranks on %d GPUs, %.0f s, seed %u\n", opt.nranks, opt.gpus, opt.seconds, opt.seed);
  std::fflush(stdout);
  const int failed = forkRanks(opt.nranks, [&](int rank, const ncclUniqueId& id) {
    Rank x;
    x.opt = opt;
    x.rank = rank;
    x.dev = rank % opt.gpus;
    return x.run(id);  // a hang ends the process with 14 and a line saying where
  }, [&](int rank) { poseAsHostOfTest(rank, opt.nranks); });
  std::printf("soak: %s\n", failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}
