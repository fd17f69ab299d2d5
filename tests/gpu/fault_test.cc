// Peer failure on real GPUs. One process per rank (ranks share GPUs when -g is smaller than -n:
// the test then sets NCCL_WEFT_ALLOW_GPU_SHARING=1), the last rank is the victim:
//   kill-allreduce  the victim is SIGKILLed while the others wait for it in an all_reduce
//   kill-sendrecv   ... in one group of sends and receives to every peer
//   kill-sendrecv-reg  ... the same on registered 64 MiB buffers, after warm-ups that let every
//                   sender map its receivers' buffers: the survivors wait in the zero-copy path
//                   (a sender for the dead receiver's offer)
//   kill-graph      ... in the replay of a CUDA graph of an all_reduce that every rank captured
//   stop-continue   the victim is stopped (SIGSTOP) for 1.5 s and continued: all complete, no error
//   stop-too-long   the victim stays stopped: the others fail after NCCL_TIMEOUT (set to 4 s here)
//   kill-finalize   ... while the others are in ncclCommFinalize (a barrier with every rank): it
//                   must fail promptly naming the victim, and ncclCommDestroy must return
//   kill-window     ... while the others are in ncclCommWindowRegister (an exchange with every
//                   rank): it must fail promptly naming the victim, give no window, and
//                   ncclCommDestroy must return
//   skip-call       the victim, alive and running, does not call the all_reduce: the others report
//                   it after NCCL_WEFT_HANG_REPORT_SECONDS (2 s here) and fail after NCCL_TIMEOUT,
//                   naming it as the rank that has issued fewer collectives
//   kill-shrink     as kill-allreduce, then the survivors ncclCommShrink the victim away with
//                   NCCL_SHRINK_ABORT and check an all_reduce on the shrunk communicator
//   revoke-shrink   the victim, alive, does not call the all_reduce; after 1 s the survivors
//                   ncclCommRevoke (their kernels must stop at once, before any timeout), check
//                   that the parent refuses collectives, then shrink (default flags) and check
//   shrink-alive    nothing fails: the survivors shrink the victim away while it waits to call an
//                   all_reduce on the parent, check one on the child, then every rank, the
//                   victim too, checks one on the parent (a shrink leaves the parent working)
//   skip-graph      every rank replays a captured all_reduce back to back for longer than
//                   NCCL_TIMEOUT (that must not be taken for a hang), then the victim does not
//                   launch the next replay: the others fail after NCCL_TIMEOUT, naming it as the rank
//                   that runs no kernel of the replay
//   skip-sendrecv   after a first exchange of sends and receives between every pair, the victim
//                   does not call the second: the others report it as the rank that has posted
//                   fewer sends to them than their receives
//   exit-idle       after the warm-up, the victim destroys its communicator and exits (the end of a
//                   job): the survivors, with no work pending, get no warning (their NCCL_DEBUG=WARN
//                   logs are read) but ncclRemoteError from ncclCommGetAsyncError and from their next
//                   all_reduce at once, with a last error naming the peer and saying their work had
//                   finished
//   mismatch-count  nothing fails, but the victim's all_reduce has half the others' count (it calls
//                   0.3 s after them)
//   mismatch-root   the victim's broadcast names root 1, the others' root 0 (it calls after them)
//   mismatch-call   the victim calls all_gather where the others call all_reduce (it calls first)
//   mismatch-send   rank 0 sends the victim kCount floats, the victim receives half as many (it calls
//                   after); the other ranks call nothing
//                   In the three, every rank (the victim too) must get ncclInvalidUsage, from the call
//                   or from ncclCommGetAsyncError within the deadline (also a rank whose call has
//                   completed: the mismatch came later), with a last error that says the
//                   collective differs between ranks and what differs; abort returns, the stream drains.
// A survivor must see ncclRemoteError from ncclCommGetAsyncError within a deadline and a last error
// naming the victim's rank ("exited", "stopped", or "has issued" fewer collectives); ncclCommAbort must return promptly and the
// stream must drain; then the survivors build a new communicator among themselves and check an
// all_reduce on it. Where a survivor fails on NCCL_TIMEOUT, its last error names the hang dump
// (NCCL_WEFT_HANG_DUMP_DIR, a fresh folder here), which must hold the reason and the host's view of
// the ranks behind. The parent reaps the victim only after the survivors are done, so the dead
// victim is a zombie meanwhile (its pid still answers kill(pid, 0)).
//   weft_gpu_fault_test [-n ranks (3)] [-g gpus (1)] [--only scenario]
// Uses only nccl.h, so it also shows what another libnccl.so.2 does (a hang is reported as one).
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "fd_io.h"
#include "nccl.h"
#include "test_hosts.h"

namespace {

constexpr int kChildAlarmSeconds = 90;   // a child still running after this is a hang
constexpr double kDeathLimitSeconds = 5;  // victim's death to the survivors' error
constexpr double kAbortLimitSeconds = 10;
constexpr size_t kCount = 1 << 20;        // floats per buffer
constexpr int kStopTimeoutSeconds = 4;    // NCCL_TIMEOUT for every scenario
constexpr int kHangReportSeconds = 2;     // NCCL_WEFT_HANG_REPORT_SECONDS for every scenario

enum class Scenario {
  KillAllReduce, KillSendRecv, KillGraph, KillFinalize, StopContinue, StopTooLong, SkipCall,
  KillShrink, RevokeShrink, ShrinkAlive, MismatchCount, MismatchRoot, MismatchCall, MismatchSend, SkipSendRecv,
  KillSendRecvRegistered, KillWindow, ExitIdle, SkipGraph
};
const char* kNames[] = {"kill-allreduce", "kill-sendrecv",  "kill-graph",    "kill-finalize", "stop-continue",
                        "stop-too-long",  "skip-call",      "kill-shrink",   "revoke-shrink", "shrink-alive",
                        "mismatch-count", "mismatch-root",  "mismatch-call", "mismatch-send",
                        "skip-sendrecv",  "kill-sendrecv-reg", "kill-window",   "exit-idle",     "skip-graph"};
constexpr int kScenarios = 19;

bool isMismatch(Scenario s) {
  return s == Scenario::MismatchCount || s == Scenario::MismatchRoot || s == Scenario::MismatchCall ||
         s == Scenario::MismatchSend;
}

bool isKill(Scenario s) {
  return s == Scenario::KillAllReduce || s == Scenario::KillSendRecv || s == Scenario::KillSendRecvRegistered ||
         s == Scenario::KillGraph ||
         s == Scenario::KillFinalize || s == Scenario::KillShrink || s == Scenario::KillWindow;
}
// The victim stays alive without calling; the parent kills it once the survivors are done.
bool victimIdles(Scenario s) {
  return s == Scenario::StopTooLong || s == Scenario::SkipCall || s == Scenario::RevokeShrink ||
         s == Scenario::SkipSendRecv || s == Scenario::SkipGraph;
}
// The survivors fail on NCCL_TIMEOUT (and write a hang dump).
bool timesOut(Scenario s) {
  return s == Scenario::StopTooLong || s == Scenario::SkipCall || s == Scenario::SkipSendRecv || s == Scenario::SkipGraph;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Rank {
  Scenario scenario;
  int rank, nranks, dev;
  size_t count = kCount;  // floats per buffer
  int fails = 0;
  void verdict(bool ok, const char* what, const std::string& detail) {
    std::printf("%s %s rank %d: %s%s%s\n", ok ? "PASS" : "FAIL", kNames[(int)scenario], rank, what,
                detail.empty() ? "" : ": ", detail.c_str());
    std::fflush(stdout);
    fails += ok ? 0 : 1;
  }
  [[noreturn]] void fatal(const char* what, const std::string& detail) {
    verdict(false, what, detail);
    _exit(1);
  }
};

std::string text(ncclResult_t r) { return ncclGetErrorString(r); }

// Fills `buf` with value, runs the all_reduce on `comm` and checks every element against the sum
// over the ranks of (rank + 1).
bool checkedAllReduce(ncclComm_t comm, int rank, int nranks, float* buf, cudaStream_t s, std::string* why) {
  std::vector<float> host(kCount, (float)(rank + 1));
  // On `s`: a cudaMemcpy from pageable memory may return before its copy lands, and `s` does not
  // wait for the legacy stream, so the all_reduce could read what the buffer held before.
  cudaMemcpyAsync(buf, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice, s);
  ncclResult_t r = ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, comm, s);
  if (r != ncclSuccess) return *why = "ncclAllReduce: " + text(r), false;
  if (cudaStreamSynchronize(s) != cudaSuccess) return *why = "cudaStreamSynchronize failed", false;
  cudaMemcpy(host.data(), buf, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  const float want = (float)nranks * (nranks + 1) / 2;
  for (size_t i = 0; i < kCount; ++i) {
    if (host[i] != want) return *why = "element " + std::to_string(i) + " is " + std::to_string(host[i]) +
                                       ", want " + std::to_string(want), false;
  }
  return true;
}

// What a survivor enqueues once the victim is gone or stopped.
ncclResult_t enqueueWaitingOp(Rank& x, ncclComm_t comm, float* send, float* recv, cudaStream_t s, cudaGraphExec_t g) {
  switch (x.scenario) {
    case Scenario::KillSendRecv:
    case Scenario::KillSendRecvRegistered:
    case Scenario::SkipSendRecv: {
      const size_t slot = x.count / x.nranks;
      ncclGroupStart();
      for (int p = 0; p < x.nranks; ++p) {
        if (p == x.rank) continue;
        ncclSend(send + p * slot, slot, ncclFloat, p, comm, s);
        ncclRecv(recv + p * slot, slot, ncclFloat, p, comm, s);
      }
      return ncclGroupEnd();
    }
    case Scenario::KillGraph:
    case Scenario::SkipGraph:
      return cudaGraphLaunch(g, s) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
    default:
      return ncclAllReduce(send, recv, kCount, ncclFloat, ncclSum, comm, s);
  }
}

// Polls the stream for up to `limit` seconds; true once its work has ended.
bool drains(cudaStream_t s, double limit, std::string* why) {
  cudaError_t q = cudaStreamQuery(s);
  for (const double d0 = now(); q == cudaErrorNotReady && now() - d0 < limit;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    q = cudaStreamQuery(s);
  }
  *why = cudaGetErrorString(q);
  return q == cudaSuccess;
}

// ncclCommShrink without the victim (the last rank), then a checked all_reduce on the child.
void shrinkAndCheck(Rank& x, ncclComm_t comm, float* buf, cudaStream_t s, int flags) {
  int victim = x.nranks - 1;
  ncclComm_t child = nullptr;
  const double t0 = now();
  const ncclResult_t r = ncclCommShrink(comm, &victim, 1, &child, nullptr, flags);
  const double took = now() - t0;
  x.verdict(r == ncclSuccess && child != nullptr && took <= kAbortLimitSeconds, "ncclCommShrink without the victim",
            text(r) + " in " + std::to_string(took) + " s" + (r == ncclSuccess ? "" : std::string(": ") + ncclGetLastError(comm)));
  if (r != ncclSuccess || child == nullptr) return;
  int count = 0, me = -1;
  ncclCommCount(child, &count);
  ncclCommUserRank(child, &me);
  x.verdict(count == x.nranks - 1 && me == x.rank, "the shrunk communicator holds the survivors in order",
            std::to_string(count) + " ranks, this one is rank " + std::to_string(me));
  std::string why;
  x.verdict(checkedAllReduce(child, x.rank, x.nranks - 1, buf, s, &why), "a checked all_reduce on it", why);
  x.verdict(ncclCommDestroy(child) == ncclSuccess, "ncclCommDestroy of the shrunk communicator", "");
}

// revoke-shrink: the survivors' all_reduce waits for the idle victim; ncclCommRevoke stops it.
void survivorRevoke(Rank& x, ncclComm_t comm, float* send, float* recv, cudaStream_t s) {
  ncclResult_t r = ncclAllReduce(send, recv, kCount, ncclFloat, ncclSum, comm, s);
  if (r != ncclSuccess) x.fatal("enqueue", text(r));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  x.verdict(cudaStreamQuery(s) == cudaErrorNotReady, "the all_reduce waits for the victim", "");
  const double t0 = now();
  r = ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT);
  const double took = now() - t0;
  std::string why;
  const bool drained = drains(s, 0.0, &why);  // ncclCommRevoke returns once the work has stopped
  x.verdict(r == ncclSuccess && took <= 1.0 && drained, "ncclCommRevoke stops the waiting all_reduce at once",
            text(r) + " in " + std::to_string(took) + " s, stream: " + why);
  ncclResult_t async = ncclInProgress;
  ncclCommGetAsyncError(comm, &async);
  x.verdict(async == ncclSuccess, "a revoked communicator reports ncclSuccess", text(async));
  r = ncclAllReduce(send, recv, kCount, ncclFloat, ncclSum, comm, s);
  x.verdict(r == ncclInvalidUsage, "the revoked communicator refuses an all_reduce", text(r));
  shrinkAndCheck(x, comm, send, s, NCCL_SHRINK_DEFAULT);
  const double d0 = now();
  r = ncclCommDestroy(comm);
  x.verdict(r == ncclSuccess && now() - d0 <= kAbortLimitSeconds, "ncclCommDestroy of the revoked parent",
            text(r) + " in " + std::to_string(now() - d0) + " s");
}

// shrink-alive: nothing failed; the parent keeps working after the survivors shrink.
void survivorShrinkAlive(Rank& x, ncclComm_t comm, float* buf, cudaStream_t s) {
  shrinkAndCheck(x, comm, buf, s, NCCL_SHRINK_DEFAULT);
  std::string why;
  x.verdict(checkedAllReduce(comm, x.rank, x.nranks, buf, s, &why), "then a checked all_reduce on the parent", why);
  ncclCommDestroy(comm);
}

// ncclCommFinalize waits for every rank; with one dead it must fail promptly, naming it.
// kill-finalize / kill-window: a call that waits for every rank on the host side (the bootstrap).
void survivorHostCall(Rank& x, ncclComm_t comm, float* recv) {
  const std::string victim = "rank " + std::to_string(x.nranks - 1);
  const bool window = x.scenario == Scenario::KillWindow;
  double t0 = now();
  ncclWindow_t win = nullptr;
  const ncclResult_t r =
      window ? ncclCommWindowRegister(comm, recv, x.count * sizeof(float), &win, 0) : ncclCommFinalize(comm);
  const double took = now() - t0;
  const std::string last = ncclGetLastError(comm);
  x.verdict(r != ncclSuccess && r != ncclInProgress, window ? "ncclCommWindowRegister fails" : "ncclCommFinalize fails",
            text(r));
  if (window) x.verdict(win == nullptr, "no window is given", "");
  x.verdict(took <= kDeathLimitSeconds, "within the deadline", std::to_string(took) + " s");
  x.verdict(last.find(victim) != std::string::npos, "the last error names the dead rank", last);
  t0 = now();
  const ncclResult_t d = ncclCommDestroy(comm);
  x.verdict(now() - t0 <= kAbortLimitSeconds, "ncclCommDestroy returns promptly",
            text(d) + " in " + std::to_string(now() - t0) + " s");
}

// mismatch-*: every rank, the victim too. Call #1 was the warm-up; call #2 differs on the victim.
void mismatchedCall(Rank& x, ncclComm_t comm, float* send, float* recv, cudaStream_t s) {
  const bool victim = x.rank == x.nranks - 1;
  const bool victimFirst = x.scenario == Scenario::MismatchCall;
  if (victim != victimFirst) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double t0 = now();
  ncclResult_t r;
  if (x.scenario == Scenario::MismatchCount) {
    r = ncclAllReduce(send, recv, victim ? kCount / 2 : kCount, ncclFloat, ncclSum, comm, s);
  } else if (x.scenario == Scenario::MismatchRoot) {
    r = ncclBroadcast(send, recv, kCount, ncclFloat, victim ? 1 : 0, comm, s);
  } else if (x.scenario == Scenario::MismatchSend) {
    r = ncclSuccess;
    if (victim) r = ncclRecv(recv, kCount / 2, ncclFloat, 0, comm, s);
    if (x.rank == 0) r = ncclSend(send, kCount, ncclFloat, x.nranks - 1, comm, s);
  } else if (victim) {
    r = ncclAllGather(send, recv, kCount / x.nranks, ncclFloat, comm, s);
  } else {
    r = ncclAllReduce(send, recv, kCount, ncclFloat, ncclSum, comm, s);
  }
  // A rank's call may complete before the mismatch is known: a broadcast from root 0 passes ranks 0
  // and 1 while rank 2's staging buffer still has room, before rank 2 calls. Such a rank's result is
  // right; its communicator must still fail once the victim's call is refused.
  ncclResult_t async = r;
  while (async == ncclSuccess && now() - t0 < kDeathLimitSeconds) {
    ncclCommGetAsyncError(comm, &async);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double seen = now() - t0;
  const std::string last = ncclGetLastError(comm);
  x.verdict(async == ncclInvalidUsage && seen <= kDeathLimitSeconds, "ncclInvalidUsage from the call or the communicator",
            "call: " + text(r) + ", then " + text(async) + " after " + std::to_string(seen) + " s");
  const char* what = x.scenario == Scenario::MismatchCount ? "(the count differs)"
                     : x.scenario == Scenario::MismatchRoot ? "(the root differs)"
                     : x.scenario == Scenario::MismatchSend ? "ncclRecv(count 524288, ncclFloat32, 2097152 bytes)"
                                                            : "(the collective differs)";
  const std::string which = x.scenario == Scenario::MismatchSend
                                ? "send #1 from rank 0 to rank " + std::to_string(x.nranks - 1)
                                : "collective #2 on this communicator differs between ranks";
  x.verdict(last.find(which) != std::string::npos && last.find(what) != std::string::npos,
            "the last error says which call differs and how", last);
  const double a0 = now();
  r = ncclCommAbort(comm);
  x.verdict(r == ncclSuccess && now() - a0 <= kAbortLimitSeconds, "ncclCommAbort returns promptly",
            text(r) + " in " + std::to_string(now() - a0) + " s");
  std::string why;
  x.verdict(drains(s, 10, &why), "the stream drains after the abort", why);
}

// The end of every survivor whose communicator failed: ncclCommAbort returns promptly, the stream
// drains, and a fresh communicator of the survivors works.
void abortAndRecover(Rank& x, ncclComm_t comm, float* buf, cudaStream_t s, const ncclUniqueId& recoveryId) {
  const double a0 = now();
  ncclResult_t r = ncclCommAbort(comm);
  const double took = now() - a0;
  x.verdict(r == ncclSuccess && took <= kAbortLimitSeconds, "ncclCommAbort returns promptly",
            text(r) + " in " + std::to_string(took) + " s");
  std::string drainWhy;
  if (!drains(s, 10, &drainWhy)) x.fatal("the stream drains after the abort", drainWhy);
  x.verdict(true, "the stream drains after the abort", "");
  ncclComm_t fresh = nullptr;
  r = ncclCommInitRank(&fresh, x.nranks - 1, recoveryId, x.rank);
  if (r != ncclSuccess) x.fatal("a new communicator of the survivors", "ncclCommInitRank: " + text(r));
  std::string why;
  x.verdict(checkedAllReduce(fresh, x.rank, x.nranks - 1, buf, s, &why), "a checked all_reduce among the survivors", why);
  ncclCommDestroy(fresh);
}

// A survivor that failed on NCCL_TIMEOUT: the hang dump its last error names holds the reason and
// the host's view (the victim behind, or stopped).
void checkHangDump(Rank& x, const std::string& last) {
  const std::string mark = "this rank's state is in ";
  const size_t at = last.find(mark);
  if (at == std::string::npos) return x.verdict(false, "the last error names a hang dump", last);
  const size_t from = at + mark.size(), end = last.find_first_of(");", from);
  const std::string path = last.substr(from, end == std::string::npos ? std::string::npos : end - from);
  std::string dump;
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    for (char buf[4096]; size_t n = std::fread(buf, 1, sizeof(buf), f);) dump.append(buf, n);
    std::fclose(f);
  }
  const std::string victim = std::to_string(x.nranks - 1);
  const std::string view = x.scenario == Scenario::SkipCall    ? "behind: rank " + victim + " has not made collective #2"
                           : x.scenario == Scenario::SkipGraph ? "graph replays: rank " + victim + " runs none"
                           : x.scenario == Scenario::SkipSendRecv ? "point-to-point: rank " + victim + " has posted"
                                                                  : "rank " + victim + " (pid";
  x.verdict(dump.find("reason: rank " + std::to_string(x.rank)) != std::string::npos &&
                dump.find(view) != std::string::npos && dump.find("NCCL_TIMEOUT=") != std::string::npos,
            "the hang dump holds the reason, the settings and the host's view", path + " (" +
                std::to_string(dump.size()) + " bytes; looked for \"" + view + "\")" + (dump.size() < 4000 ? ":\n" + dump : ""));
  std::remove(path.c_str());
}

// Replays that follow each other for longer than NCCL_TIMEOUT are not a hang. Rank 0 times a few
// and tells every rank how many make that long; each element of `recv` then holds nranks * W, W
// being the warm-up's sum that `send` still holds.
void replayLoop(Rank& x, ncclComm_t comm, float* recv, cudaStream_t s, cudaGraphExec_t g) {
  double t0 = now();
  for (int i = 0; i < 20; ++i) cudaGraphLaunch(g, s);
  if (cudaStreamSynchronize(s) != cudaSuccess) x.fatal("20 replays", "");
  int n = (int)std::min(1e6, (kStopTimeoutSeconds + 2) / std::max(1e-6, (now() - t0) / 20));
  int* count = reinterpret_cast<int*>(recv);
  cudaMemcpy(count, &n, sizeof(n), cudaMemcpyHostToDevice);
  if (ncclBroadcast(count, count, 1, ncclInt32, 0, comm, s) != ncclSuccess || cudaStreamSynchronize(s) != cudaSuccess)
    x.fatal("broadcasting the count of replays", "");
  cudaMemcpy(&n, count, sizeof(n), cudaMemcpyDeviceToHost);
  t0 = now();
  for (int i = 0; i < n; ++i) {
    if (cudaGraphLaunch(g, s) != cudaSuccess) x.fatal("cudaGraphLaunch", std::to_string(i));
  }
  const bool done = cudaStreamSynchronize(s) == cudaSuccess;
  const double took = now() - t0;
  ncclResult_t async = ncclInProgress;
  ncclCommGetAsyncError(comm, &async);
  std::vector<float> host(kCount);
  cudaMemcpy(host.data(), recv, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  const float want = (float)x.nranks * x.nranks * (x.nranks + 1) / 2;
  size_t bad = 0;
  for (float v : host) bad += v != want;
  x.verdict(done && async == ncclSuccess && bad == 0 && took > kStopTimeoutSeconds,
            "replays back to back for longer than NCCL_TIMEOUT are not taken for a hang",
            std::to_string(n) + " replays in " + std::to_string(took) + " s, " + text(async) + ", " +
                std::to_string(bad) + " wrong elements");
}

// The NCCL_DEBUG_FILE of an exit-idle rank (set before its first library call).
std::string idleLogPath(pid_t pid) { return "/tmp/weft_fault_exit_idle." + std::to_string(pid) + ".log"; }

// exit-idle: nothing is pending here when the victim exits; the communicator must fail without a
// warning, and its next call must not wait for the dead peer.
void survivorPeerExitedIdle(Rank& x, ncclComm_t comm, float* buf, cudaStream_t s, const ncclUniqueId& recoveryId) {
  const double t0 = now();
  ncclResult_t async = ncclSuccess;
  while (async == ncclSuccess && now() - t0 < kDeathLimitSeconds + 1) {
    ncclCommGetAsyncError(comm, &async);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double seen = now() - t0;  // the victim waits 0.3 s before it exits
  x.verdict(async == ncclRemoteError && seen <= kDeathLimitSeconds + 1,
            "ncclCommGetAsyncError reports ncclRemoteError once the idle peer has exited",
            "got " + text(async) + " after " + std::to_string(seen) + " s");
  const std::string last = ncclGetLastError(comm);
  const std::string who = "peer rank " + std::to_string(x.nranks - 1);
  x.verdict(last.find(who) != std::string::npos && last.find("exited") != std::string::npos &&
                last.find("had finished") != std::string::npos,
            "the last error names the peer and says the work had finished", last);
  const double c0 = now();
  const ncclResult_t r = ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, comm, s);
  x.verdict(r == ncclRemoteError && now() - c0 <= 1.0, "the next all_reduce fails at once",
            text(r) + " in " + std::to_string(now() - c0) + " s");
  std::string warned;
  std::FILE* log = std::fopen(idleLogPath(getpid()).c_str(), "r");
  for (char line[1024]; log != nullptr && std::fgets(line, sizeof(line), log) != nullptr;) {
    if (std::strstr(line, " WARN ") != nullptr && std::strstr(line, "has exited") != nullptr) warned += line;
  }
  if (log != nullptr) std::fclose(log);
  std::remove(idleLogPath(getpid()).c_str());
  x.verdict(warned.empty(), "no warning about the exit (NCCL_DEBUG=WARN log)", warned);
  abortAndRecover(x, comm, buf, s, recoveryId);
}

void survivor(Rank& x, ncclComm_t comm, float* send, float* recv, cudaStream_t s, cudaGraphExec_t g,
              const ncclUniqueId& recoveryId) {
  if (x.scenario == Scenario::ExitIdle) return survivorPeerExitedIdle(x, comm, send, s, recoveryId);
  if (x.scenario == Scenario::KillFinalize || x.scenario == Scenario::KillWindow)
    return survivorHostCall(x, comm, recv);
  if (x.scenario == Scenario::RevokeShrink) return survivorRevoke(x, comm, send, recv, s);
  if (x.scenario == Scenario::ShrinkAlive) return survivorShrinkAlive(x, comm, send, s);
  const int victim = x.nranks - 1;
  const double t0 = now();
  ncclResult_t r = enqueueWaitingOp(x, comm, send, recv, s, g);
  if (r != ncclSuccess && r != ncclInProgress && r != ncclRemoteError) x.fatal("enqueue", text(r));
  if (x.scenario == Scenario::StopContinue) {
    std::string why;
    ncclResult_t async = ncclSuccess;
    const bool done = cudaStreamSynchronize(s) == cudaSuccess;
    ncclCommGetAsyncError(comm, &async);
    x.verdict(done && async == ncclSuccess, "the all_reduce completes after the peer continues",
              "waited " + std::to_string(now() - t0) + " s, async error " + text(async));
    // Every rank's send buffer still holds the warm-up's sum W, so each element is now nranks * W.
    std::vector<float> host(kCount);
    cudaMemcpy(host.data(), recv, kCount * sizeof(float), cudaMemcpyDeviceToHost);
    const float want = (float)x.nranks * x.nranks * (x.nranks + 1) / 2;
    size_t bad = 0;
    for (float v : host) bad += v != want;
    x.verdict(bad == 0, "its result is right", std::to_string(bad) + " wrong elements");
    // The next all_reduce must still be right: the communicator is not poisoned.
    x.verdict(checkedAllReduce(comm, x.rank, x.nranks, send, s, &why), "a checked all_reduce after it", why);
    ncclCommDestroy(comm);
    return;
  }
  ncclResult_t async = ncclSuccess;
  const bool waitsForTimeout = timesOut(x.scenario);
  const double limit = (waitsForTimeout ? kStopTimeoutSeconds : 0) + kDeathLimitSeconds;
  while (now() - t0 < limit + 20) {
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) break;
    if (cudaStreamQuery(s) == cudaSuccess) break;  // completed without the victim: wrong
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double seen = now() - t0;
  const std::string last = ncclGetLastError(comm);
  x.verdict(async == ncclRemoteError, "ncclCommGetAsyncError reports ncclRemoteError",
            "got " + text(async) + " after " + std::to_string(seen) + " s");
  x.verdict(seen <= limit, "within the deadline", std::to_string(seen) + " s (limit " + std::to_string(limit) + " s)");
  const bool skip = waitsForTimeout && x.scenario != Scenario::StopTooLong;
  const std::string who = (skip ? "rank " : "peer rank ") + std::to_string(victim);
  const char* how = x.scenario == Scenario::SkipCall       ? "has issued 1 collectives"
                    : x.scenario == Scenario::SkipSendRecv ? "has posted 1 sends to this rank against this rank's 2"
                    : x.scenario == Scenario::SkipGraph    ? "runs no kernel of a graph replay"
                    : x.scenario == Scenario::StopTooLong  ? "stopped"
                                                           : "exited";
  x.verdict(last.find(who) != std::string::npos && last.find(how) != std::string::npos,
            "the last error names the peer and what happened", last);
  if (waitsForTimeout) checkHangDump(x, last);
  if (x.scenario == Scenario::KillShrink) {
    shrinkAndCheck(x, comm, send, s, NCCL_SHRINK_ABORT);
    std::string why;
    x.verdict(drains(s, 0.0, &why), "the parent's stream has drained", why);
    const double a0 = now();
    r = ncclCommAbort(comm);
    x.verdict(r == ncclSuccess && now() - a0 <= kAbortLimitSeconds, "ncclCommAbort of the parent returns promptly",
              text(r) + " in " + std::to_string(now() - a0) + " s");
    return;
  }
  abortAndRecover(x, comm, send, s, recoveryId);
}

int runRank(Scenario sc, int rank, int nranks, int gpus, int idRead, const std::vector<int>& idWrites) {
  alarm(kChildAlarmSeconds);
  if (sc == Scenario::ExitIdle) {  // read before the first library call
    setenv("NCCL_DEBUG", "WARN", 1);
    setenv("NCCL_DEBUG_FILE", idleLogPath(getpid()).c_str(), 1);
  }
  Rank x{sc, rank, nranks, rank % gpus};
  cudaSetDevice(x.dev);
  ncclUniqueId ids[2];  // the communicator of all ranks; the survivors' new one
  if (rank == 0) {
    for (ncclUniqueId& id : ids) {
      if (ncclGetUniqueId(&id) != ncclSuccess) x.fatal("ncclGetUniqueId", "");
    }
    for (int fd : idWrites) {
      if (write(fd, ids, sizeof(ids)) != (ssize_t)sizeof(ids)) x.fatal("sending the unique ids", "");
    }
  } else if (!readAll(idRead, ids, sizeof(ids))) {
    x.fatal("receiving the unique ids", "");
  }
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, nranks, ids[0], rank);
  if (r != ncclSuccess) x.fatal("ncclCommInitRank", text(r));
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float *send = nullptr, *recv = nullptr;
  const bool registered = sc == Scenario::KillSendRecvRegistered;
  if (registered) x.count = 16 * kCount;  // 64 MiB: parts of at least one connection step per channel
  if (cudaMalloc(&send, x.count * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&recv, x.count * sizeof(float)) != cudaSuccess) {
    x.fatal("cudaMalloc", "");
  }
  void* handles[2] = {};
  if (registered && (ncclCommRegister(comm, send, x.count * sizeof(float), &handles[0]) != ncclSuccess ||
                     ncclCommRegister(comm, recv, x.count * sizeof(float), &handles[1]) != ncclSuccess)) {
    x.fatal("ncclCommRegister", "");
  }
  std::string why;
  if (!checkedAllReduce(comm, rank, nranks, send, s, &why)) x.fatal("warm-up all_reduce", why);
  cudaGraphExec_t graph = nullptr;
  // Every rank captures (connections are made at capture) and replays once.
  if (sc == Scenario::KillGraph || sc == Scenario::SkipGraph) {
    cudaGraph_t g;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    r = ncclAllReduce(send, recv, kCount, ncclFloat, ncclSum, comm, s);
    if (cudaStreamEndCapture(s, &g) != cudaSuccess || r != ncclSuccess) x.fatal("capturing an all_reduce", text(r));
    if (cudaGraphInstantiate(&graph, g, 0) != cudaSuccess) x.fatal("cudaGraphInstantiate", "");
    if (cudaGraphLaunch(graph, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) x.fatal("graph replay", "");
  }
  if (sc == Scenario::KillSendRecv || sc == Scenario::SkipSendRecv || registered) {
    // Connect every pair first, so that the survivors wait in the data path; registered: two more
    // rounds, in which the receivers share their buffers and the senders map them.
    for (int round = 0; round < (registered ? 3 : 1); ++round) {
      if (enqueueWaitingOp(x, comm, send, recv, s, graph) != ncclSuccess || cudaStreamSynchronize(s) != cudaSuccess) {
        x.fatal("warm-up send/recv", "");
      }
    }
  }
  if (sc == Scenario::SkipGraph) replayLoop(x, comm, recv, s, graph);
  if (isMismatch(sc)) {
    mismatchedCall(x, comm, send, recv, s);
    return x.fails == 0 ? 0 : 1;
  }
  if (rank == nranks - 1) {  // the victim
    if (isKill(sc)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the survivors are waiting by now
      raise(SIGKILL);
    }
    if (sc == Scenario::SkipCall || sc == Scenario::RevokeShrink || sc == Scenario::SkipSendRecv ||
        sc == Scenario::SkipGraph) {
      for (;;) pause();  // alive and running, but never calls; the parent kills it at the end
    }
    if (sc == Scenario::ExitIdle) {  // the end of a job: its work done, this rank leaves first
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ncclCommDestroy(comm);
      std::remove(idleLogPath(getpid()).c_str());
      return 0;
    }
    if (sc == Scenario::ShrinkAlive) {  // blocks until the survivors have shrunk and join it
      if (!checkedAllReduce(comm, rank, nranks, send, s, &why)) x.fatal("the all_reduce on the parent", why);
      ncclCommDestroy(comm);
      return 0;
    }
    raise(SIGSTOP);  // stop-continue: the parent continues this process after 1.5 s
    if (enqueueWaitingOp(x, comm, send, recv, s, graph) != ncclSuccess || cudaStreamSynchronize(s) != cudaSuccess) {
      x.fatal("the all_reduce after continuing", "");
    }
    if (!checkedAllReduce(comm, rank, nranks, send, s, &why)) x.fatal("a checked all_reduce after continuing", why);
    ncclCommDestroy(comm);
    return 0;
  }
  survivor(x, comm, send, recv, s, graph, ids[1]);
  return x.fails == 0 ? 0 : 1;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

bool runScenario(Scenario sc, int nranks, int gpus) {
  std::printf("== %s: %d ranks on %d GPU(s), the victim is rank %d\n", kNames[(int)sc], nranks, gpus, nranks - 1);
  std::fflush(stdout);
  std::vector<int> reads(nranks, -1), writes(nranks, -1);
  for (int g = 1; g < nranks; ++g) {
    int p[2];
    if (pipe(p) != 0) return std::perror("pipe"), false;
    reads[g] = p[0];
    writes[g] = p[1];
  }
  std::vector<pid_t> pids(nranks);
  for (int g = 0; g < nranks; ++g) {
    pids[g] = fork();
    if (pids[g] < 0) return std::perror("fork"), false;
    if (pids[g] == 0) {
      std::vector<int> mine;
      for (int h = 1; h < nranks; ++h) {
        if (h != g) close(reads[h]);
        if (g == 0) mine.push_back(writes[h]);
        else close(writes[h]);
      }
      poseAsHostOfTest(g, nranks);
      _exit(runRank(sc, g, nranks, gpus, reads[g], mine));
    }
  }
  for (int g = 1; g < nranks; ++g) {
    close(reads[g]);
    close(writes[g]);
  }
  const pid_t victim = pids[nranks - 1];
  int status = 0;
  if (sc == Scenario::StopContinue) {
    if (waitpid(victim, &status, WUNTRACED) == victim && WIFSTOPPED(status)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      kill(victim, SIGCONT);
    }
  }
  bool ok = true;
  for (int g = 0; g + 1 < nranks; ++g) {  // survivors first: the dead victim stays a zombie meanwhile
    waitpid(pids[g], &status, 0);
    const bool good = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!good) std::printf("FAIL %s rank %d: %s\n", kNames[(int)sc], g, describe(status).c_str());
    ok = ok && good;
  }
  if (victimIdles(sc)) kill(victim, SIGKILL);
  waitpid(victim, &status, 0);
  const bool victimLives =
      sc == Scenario::StopContinue || sc == Scenario::ShrinkAlive || sc == Scenario::ExitIdle || isMismatch(sc);
  const bool victimOk = victimLives ? (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                                    : (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  if (!victimOk) std::printf("FAIL %s victim rank %d: %s\n", kNames[(int)sc], nranks - 1, describe(status).c_str());
  std::printf("%s %s\n", ok && victimOk ? "PASSED" : "FAILED", kNames[(int)sc]);
  std::fflush(stdout);
  return ok && victimOk;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 3, gpus = 1;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-n" && i + 1 < argc) nranks = std::atoi(argv[++i]);
    else if (a == "-g" && i + 1 < argc) gpus = std::atoi(argv[++i]);
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [-n ranks (>= 2, default 3)] [-g gpus (default 1)] [--only scenario]\n", argv[0]);
      return 2;
    }
  }
  if (nranks < 2 || gpus < 1) return std::fprintf(stderr, "need -n >= 2 and -g >= 1\n"), 2;
  // Set before any library call: every child inherits them.
  if (nranks > gpus) setenv("NCCL_WEFT_ALLOW_GPU_SHARING", "1", 1);
  setenv("NCCL_TIMEOUT", std::to_string(kStopTimeoutSeconds).c_str(), 1);
  setenv("NCCL_WEFT_HANG_REPORT_SECONDS", std::to_string(kHangReportSeconds).c_str(), 1);
  char dumpDir[] = "/tmp/weft_fault_dumps.XXXXXX";  // the survivors read and remove their dumps
  if (mkdtemp(dumpDir) == nullptr) return std::perror("mkdtemp"), 1;
  setenv("NCCL_WEFT_HANG_DUMP_DIR", dumpDir, 1);
  int failed = 0, ran = 0;
  for (int s = 0; s < kScenarios; ++s) {
    if (!only.empty() && only != kNames[s]) continue;
    ++ran;
    failed += runScenario((Scenario)s, nranks, gpus) ? 0 : 1;
  }
  std::string leftover;  // dumps a failed survivor did not get to remove
  if (DIR* d = opendir(dumpDir)) {
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      leftover += std::string(" ") + e->d_name;
      std::remove((std::string(dumpDir) + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
  rmdir(dumpDir);
  if (!leftover.empty()) std::printf("hang dumps left by failed ranks:%s\n", leftover.c_str());
  if (ran == 0) return std::fprintf(stderr, "no scenario named %s\n", only.c_str()), 2;
  std::printf("%d of %d scenarios passed\n", ran - failed, ran);
  return failed == 0 ? 0 : 1;
}
