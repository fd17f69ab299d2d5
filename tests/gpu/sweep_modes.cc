// The three ways of driving GPUs: (a) one thread drives all local GPUs (ncclCommInitAll, or
// ncclGroupStart + ncclCommInitRank per GPU + ncclGroupEnd), collectives grouped across the GPUs;
// (b) one thread per GPU in one process; (c) one process per GPU, forked before any CUDA call, the
// unique id handed over through pipes. All three run the same rank body (runRanks).
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sweep_host.h"
#include "test_hosts.h"

// Weak, so that the program also links against a library build that lacks the symbol (the branch
// skeleton this was written on); with any real libnccl.so.2 it binds as usual.
#pragma weak ncclGetUniqueId

namespace sweep {

namespace {

ncclResult_t getUniqueId(ncclUniqueId* id) {
  if (&ncclGetUniqueId == nullptr) {
    std::printf("FAIL: the NCCL library does not export ncclGetUniqueId\n");
    return ncclInvalidUsage;
  }
  return ncclGetUniqueId(id);
}

bool writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool readAll(int fd, void* data, size_t n, int timeoutSec) {
  char* p = static_cast<char*>(data);
  const double deadline = nowSec() + timeoutSec;
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int ms = static_cast<int>(std::max(0.0, deadline - nowSec()) * 1000);
    const int pr = poll(&pfd, 1, ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return false;
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// One thread drives every rank: it simply makes the id.
class LocalIds : public IdChannel {
 public:
  bool share(int, ncclUniqueId* id) override { return getUniqueId(id) == ncclSuccess; }
};

// One thread per rank: rank 0 makes the k-th id, the others wait for the k-th id.
class ThreadIds : public IdChannel {
 public:
  explicit ThreadIds(int n) : taken_(n, 0) {}
  bool share(int rank, ncclUniqueId* id) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (rank == 0) {
      if (getUniqueId(id) != ncclSuccess) return false;
      ids_.push_back(*id);
      taken_[0]++;
      cv_.notify_all();
      return true;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(300), [&] { return ids_.size() > taken_[rank]; })) return false;
    *id = ids_[taken_[rank]++];
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ncclUniqueId> ids_;
  std::vector<size_t> taken_;
};

// One process per rank: rank 0 writes each id into one pipe per other rank.
class PipeIds : public IdChannel {
 public:
  PipeIds(std::vector<int> writeFds, int readFd) : writeFds_(std::move(writeFds)), readFd_(readFd) {}
  bool share(int rank, ncclUniqueId* id) override {
    if (rank != 0) return readAll(readFd_, id, sizeof(*id), 300);
    if (getUniqueId(id) != ncclSuccess) return false;
    for (int fd : writeFds_) {
      if (!writeAll(fd, id, sizeof(*id))) return false;
    }
    return true;
  }

 private:
  std::vector<int> writeFds_;
  int readFd_;
};

uint64_t areaFor(const std::vector<Case>& cases, int n) {
  uint64_t a = 64ull << 20;  // the extras need a few MiB
  for (const Case& c : cases) a = std::max(a, areaBytesFor(c, n));
  const uint64_t g = 2ull << 20;
  return (a + g - 1) / g * g;
}

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3f s", s);
  return b;
}

}  // namespace

void runRanks(std::vector<RankCtx*>& L, const Options& o, IdChannel& ids, bool threadedRanks) {
  const int n = L[0]->nranks;
  const std::vector<Case> cases = buildCases(o, n);
  const uint64_t area = areaFor(cases, n);
  for (RankCtx* x : L) {
    watchNote(x->rank, "allocating %llu MiB x 2", static_cast<unsigned long long>(area >> 20));
    if (!setupRank(*x, o, area)) {
      std::printf("FAIL rank %d: setup failed; exiting (the other ranks would wait forever)\n", x->rank);
      std::fflush(stdout);
      _exit(2);
    }
  }
  if (o.selfTest) runSelfTest(L, o);
  if (o.sweep) {
    watchNote(L[0]->rank, "sweep: starting %zu cases", cases.size());
    const double t0 = nowSec();
    // Ranks of one process sharing a GPU share its CUDA context, and a launch that has to wait for
    // the context holds a lock the other ranks' launches need (seen on H200, before kernels were
    // loaded and the stack reserved at creation: one rank ~64 cases ahead stuck in
    // cudaLaunchKernelExC, the other waiting for the lock in cudaLaunchKernel). One case per
    // synchronisation keeps every rank's queue short, so no launch can wait behind many kernels.
    const bool sharedContext = threadedRanks && n > o.devices;
    runSweep(L, cases, o, sharedContext ? 1 : kSweepBatchCases);
    std::printf("[rank %d%s] sweep: %zu cases in %.1f s\n", L[0]->rank, L.size() > 1 ? "..." : "", cases.size(),
                nowSec() - t0);
  }
  bool fatal = false;
  for (RankCtx* x : L) fatal = fatal || x->fatal;
  if (o.extras && !fatal) runExtras(L, o, ids, threadedRanks);
  for (RankCtx* x : L) fatal = fatal || x->fatal;
  if (!fatal) {
    finalizeAndDestroyMain(L);
  } else {
    for (RankCtx* x : L) {
      if (x->comm) ncclCommAbort(x->comm);
      x->comm = nullptr;
    }
    addExtraAll(L, "ncclCommFinalize + ncclCommDestroy", -1, "skipped after a CUDA error; the communicators were aborted");
  }
  // After a CUDA error or a kernel that never finished, freeing would synchronise with it and hang;
  // the process exits soon anyway.
  for (RankCtx* x : L) {
    if (!x->fatal) teardownRank(*x);
  }
}

Tally runOneThreadAllGpus(const Options& o, int G, bool initAll) {
  watchStart(o.timeoutSec);
  std::vector<RankCtx> ctx(G);
  std::vector<ncclComm_t> comms(G, nullptr);
  std::vector<int> devs(G);
  for (int g = 0; g < G; ++g) devs[g] = g % o.devices;
  const std::string initName = initAll ? "init: ncclCommInitAll" : "init: ncclGroupStart + ncclCommInitRank x N + ncclGroupEnd";
  watchNote(0, "%s", initName.c_str());
  const double t0 = nowSec();
  ncclResult_t r;
  if (initAll) {
    r = ncclCommInitAll(comms.data(), G, devs.data());
  } else {
    ncclUniqueId id;
    r = getUniqueId(&id);
    if (r == ncclSuccess) r = ncclGroupStart();
    for (int g = 0; g < G && r == ncclSuccess; ++g) {
      cudaSetDevice(g % o.devices);
      r = ncclCommInitRank(&comms[g], G, id, g);
    }
    const ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess) r = e;
  }
  const double dt = nowSec() - t0;
  Tally out;
  if (r != ncclSuccess) {
    out.addExtra(initName, 0, std::string(ncclGetErrorString(r)) + ": " + ncclGetLastError(nullptr));
    out.ranksMerged = G;
    return out;
  }
  std::vector<RankCtx*> L;
  for (int g = 0; g < G; ++g) {
    ctx[g].rank = g;
    ctx[g].nranks = G;
    ctx[g].dev = g % o.devices;
    ctx[g].comm = comms[g];
    L.push_back(&ctx[g]);
  }
  ctx[0].tally.addExtra(initName, 1, "took " + seconds(dt));
  LocalIds ids;
  runRanks(L, o, ids, false);
  for (RankCtx& x : ctx) {
    x.tally.ranksMerged = 1;
    out.merge(x.tally);
  }
  return out;
}

Tally runThreadPerGpu(const Options& o, int G) {
  watchStart(o.timeoutSec);
  Tally out;
  ncclUniqueId id;
  const ncclResult_t r = getUniqueId(&id);
  if (r != ncclSuccess) {
    out.addExtra("init: ncclGetUniqueId", 0, ncclGetErrorString(r));
    out.ranksMerged = G;
    return out;
  }
  ThreadIds ids(G);
  std::vector<RankCtx> ctx(G);
  std::vector<std::thread> threads;
  for (int g = 0; g < G; ++g) {
    threads.emplace_back([&, g] {
      RankCtx& x = ctx[g];
      x.rank = g;
      x.nranks = G;
      x.dev = g % o.devices;
      cudaSetDevice(x.dev);
      // Before the communicator exists, so that no rank's collective can be running on a shared
      // GPU while another rank's thread loads (sweep_common.h: loadSweepKernels).
      const cudaError_t le = loadSweepKernels();
      if (le != cudaSuccess) {
        std::printf("FAIL rank %d: loading the sweep's kernels: %s; exiting\n", g, cudaGetErrorString(le));
        std::fflush(stdout);
        _exit(2);
      }
      watchNote(g, "ncclCommInitRank");
      const double t0 = nowSec();
      const ncclResult_t ir = ncclCommInitRank(&x.comm, G, id, g);
      if (ir != ncclSuccess) {
        std::printf("FAIL rank %d: ncclCommInitRank returned %s: %s; exiting\n", g, ncclGetErrorString(ir),
                    ncclGetLastError(nullptr));
        std::fflush(stdout);
        _exit(2);
      }
      x.tally.addExtra("init: ncclCommInitRank, one thread per GPU", 1, "took " + seconds(nowSec() - t0));
      std::vector<RankCtx*> L{&x};
      runRanks(L, o, ids, true);
    });
  }
  for (std::thread& t : threads) t.join();
  for (RankCtx& x : ctx) {
    x.tally.ranksMerged = 1;
    out.merge(x.tally);
  }
  return out;
}

Tally runProcessPerGpu(const Options& o, int G) {
  std::fflush(stdout);
  std::vector<int> idRead(G, -1), idWrite(G, -1), resRead(G, -1), resWrite(G, -1);
  for (int g = 0; g < G; ++g) {
    int p[2];
    if (pipe(p) != 0) {
      std::perror("pipe");
      std::exit(2);
    }
    resRead[g] = p[0];
    resWrite[g] = p[1];
    if (g == 0) continue;
    if (pipe(p) != 0) {
      std::perror("pipe");
      std::exit(2);
    }
    idRead[g] = p[0];
    idWrite[g] = p[1];
  }
  std::vector<pid_t> pids(G, -1);
  for (int g = 0; g < G; ++g) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      std::exit(2);
    }
    if (pid > 0) {
      pids[g] = pid;
      continue;
    }
    // Child: rank g. Keep only its own pipe ends (rank 0 keeps the write ends of all id pipes).
    std::vector<int> myWrites;
    for (int h = 0; h < G; ++h) {
      close(resRead[h]);
      if (h != g) close(resWrite[h]);
      if (h == 0) continue;
      if (h != g) close(idRead[h]);
      if (g == 0) myWrites.push_back(idWrite[h]);
      else close(idWrite[h]);
    }
    watchStart(o.timeoutSec);
    PipeIds ids(myWrites, g == 0 ? -1 : idRead[g]);
    RankCtx x;
    x.rank = g;
    x.nranks = G;
    x.dev = g % o.devices;
    poseAsHostOfTest(g, G);
    ncclUniqueId id;
    watchNote(g, "sharing the unique id");
    if (!ids.share(g, &id)) {
      std::printf("FAIL rank %d: could not share the unique id\n", g);
      std::fflush(stdout);
      _exit(2);
    }
    cudaSetDevice(x.dev);
    watchNote(g, "ncclCommInitRank");
    const double t0 = nowSec();
    const ncclResult_t ir = ncclCommInitRank(&x.comm, G, id, g);
    if (ir != ncclSuccess) {
      std::printf("FAIL rank %d: ncclCommInitRank returned %s: %s\n", g, ncclGetErrorString(ir), ncclGetLastError(nullptr));
      std::fflush(stdout);
      _exit(2);
    }
    x.tally.addExtra("init: ncclCommInitRank, one process per GPU", 1, "took " + seconds(nowSec() - t0));
    std::vector<RankCtx*> L{&x};
    runRanks(L, o, ids, false);
    x.tally.ranksMerged = 1;
    const std::string text = x.tally.serialize();
    writeAll(resWrite[g], text.data(), text.size());
    close(resWrite[g]);
    std::fflush(stdout);
    _exit(x.tally.allPassed() ? 0 : 1);
  }
  // Parent: collect every child's tally; once one child failed, give the rest 30 s, then kill them
  // (they are most likely waiting for the dead peer).
  for (int g = 0; g < G; ++g) {
    close(resWrite[g]);
    if (g > 0) {
      close(idRead[g]);
      close(idWrite[g]);
    }
  }
  std::vector<std::string> texts(G);
  std::vector<int> status(G, 0);
  std::vector<bool> reaped(G, false), open(G, true);
  double killAt = 0;
  while (true) {
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int g = 0; g < G; ++g) {
      if (open[g]) {
        pfds.push_back(pollfd{resRead[g], POLLIN, 0});
        who.push_back(g);
      }
    }
    if (!pfds.empty()) {
      poll(pfds.data(), pfds.size(), 500);
      for (size_t i = 0; i < pfds.size(); ++i) {
        if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[4096];
        const ssize_t r = read(pfds[i].fd, buf, sizeof(buf));
        if (r > 0) {
          texts[who[i]].append(buf, static_cast<size_t>(r));
        } else if (r == 0 || errno != EINTR) {
          open[who[i]] = false;
          close(pfds[i].fd);
        }
      }
    } else {
      usleep(100 * 1000);
    }
    bool allDone = true;
    for (int g = 0; g < G; ++g) {
      if (!reaped[g]) {
        int st = 0;
        if (waitpid(pids[g], &st, WNOHANG) == pids[g]) {
          reaped[g] = true;
          status[g] = st;
          const bool bad = !WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 1);
          if (bad && killAt == 0) killAt = nowSec() + 30;
        }
      }
      allDone = allDone && reaped[g] && !open[g];
    }
    if (allDone) break;
    if (killAt != 0 && nowSec() > killAt) {
      for (int g = 0; g < G; ++g) {
        if (!reaped[g]) {
          std::printf("coll_sweep: killing rank %d (pid %d): a peer process failed 30 s ago\n", g,
                      static_cast<int>(pids[g]));
          kill(pids[g], SIGKILL);
        }
      }
      killAt = nowSec() + 3600;
    }
  }
  Tally out;
  for (int g = 0; g < G; ++g) {
    Tally t;
    if (!t.parse(texts[g])) {
      std::string how = WIFEXITED(status[g]) ? "exit status " + std::to_string(WEXITSTATUS(status[g]))
                                             : "signal " + std::to_string(WTERMSIG(status[g]));
      out.addExtra("rank " + std::to_string(g) + " process finished and reported", 0, "ended with " + how +
                   " before reporting its results (see its FAIL lines above)");
      continue;
    }
    out.merge(t);
  }
  return out;
}

bool probeMachine(Probe* out) {
  std::fflush(stdout);
  int p[2];
  if (pipe(p) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(p[0]);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    int version = 0;
    ncclGetVersion(&version);
    Dl_info info{};
    std::string path = dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) && info.dli_fname ? info.dli_fname : "?";
    std::string text = std::to_string(count) + " " + std::to_string(version);
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp prop;
      text += " " + std::to_string(cudaGetDeviceProperties(&prop, d) == cudaSuccess ? prop.major : 0);
    }
    text += "\n" + path + "\n";
    writeAll(p[1], text.data(), text.size());
    _exit(0);
  }
  close(p[1]);
  std::string text;
  char buf[1024];
  ssize_t r;
  while ((r = read(p[0], buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR)) {
    if (r > 0) text.append(buf, static_cast<size_t>(r));
  }
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  const size_t nl = text.find('\n');
  if (nl == std::string::npos) return false;
  const std::string first = text.substr(0, nl);
  std::string rest = text.substr(nl + 1);
  if (!rest.empty() && rest.back() == '\n') rest.pop_back();
  out->libraryPath = rest;
  std::vector<long> nums;
  size_t pos = 0;
  while (pos < first.size()) {
    size_t end = first.find(' ', pos);
    if (end == std::string::npos) end = first.size();
    nums.push_back(std::stol(first.substr(pos, end - pos)));
    pos = end + 1;
  }
  if (nums.size() < 2) return false;
  out->deviceCount = static_cast<int>(nums[0]);
  out->ncclVersion = static_cast<int>(nums[1]);
  for (size_t i = 2; i < nums.size(); ++i) out->majors.push_back(static_cast<int>(nums[i]));
  return true;
}

}  // namespace sweep
