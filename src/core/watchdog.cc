#include "core/watchdog.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/call_check.h"
#include "core/comm_init.h"
#include "core/communicator.h"
#include "core/hang_dump.h"
#include "core/op_ledger.h"
#include "core/peer_info.h"
#include "runtime/gpu.h"

namespace weft::core {

const param::IntParam kPeerWaitTimeout{"NCCL_TIMEOUT", 1800};

namespace {

const param::IntParam kIntervalMs{"NCCL_WEFT_WATCHDOG_INTERVAL_MS", 100};
const param::IntParam kHangReportSeconds{"NCCL_WEFT_HANG_REPORT_SECONDS", 60};
// How long a rank's unfinished work may go on after a peer exits before it is aborted: work that
// no longer needs the peer (its part of a ring was done) ends within it.
const param::IntParam kPeerExitGraceMs{"NCCL_WEFT_PEER_EXIT_GRACE_MS", 1000};
constexpr double kProgressLookSeconds = 0.5;  // how often the communicator's last launch is queried

// The fields after the command name: "S ppid pgrp ..." (field 3 onwards). The name is the text
// between the first "(" and the LAST ")", so a name holding ") " cannot shift the fields.
bool fieldsAfterName(const std::string& statText, std::vector<std::string>* fields) {
  const size_t close = statText.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(statText.substr(close + 1));
  fields->assign(std::istream_iterator<std::string>(in), std::istream_iterator<std::string>());
  return !fields->empty() && (*fields)[0].size() == 1;
}

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Watched {
  ncclComm* comm;
  std::vector<pid_t> pids;          // per rank: pid of a watched peer process, else 0
  std::vector<uint64_t> starts;     // per rank: its start time as it reported it (0: unknown)
  PeerWatch watch;
  ProgressWatch progress;
  double lastLook = 0;
  int goneRank = -1;  // a peer seen exiting, while this rank's work may still end
  double goneAt = 0;
  uint64_t replayToken = 0;  // the replay stamps last seen (ReplayView::token), and since when
  double replaySince = 0;
};

// Fails the communicator with `why` as its last error (by default this thread's last warning).
void failCommunicator(ncclComm* comm, ncclResult_t code = ncclRemoteError, const char* why = nullptr) {
  comm->setLastError(why != nullptr ? why : log::lastErrorOfThread());
  comm->asyncError.store(code);
  requestAbort(comm);
}

// The communicator's ranks on this rank's host, in rank order (this one included).
std::vector<int> hostMatesOf(ncclComm* comm) {
  std::vector<uint64_t> hostOf(comm->nRanks);
  for (int r = 0; r < comm->nRanks; ++r) hostOf[r] = comm->peers[r].hostHash;
  return hostRanksOf(hostOf, comm->rank);
}

// The ranks of the host whose sends to (receives from) this rank fall short of its own receives
// from (sends to) them.
std::string p2pLaggardsOf(ncclComm* comm) {
  const std::vector<int> host = hostMatesOf(comm);
  const int self = (int)(std::find(host.begin(), host.end(), comm->rank) - host.begin());
  std::vector<P2pTally> tallies;
  for (int i = 0; i < (int)host.size(); ++i) {
    if (i == self) continue;
    P2pTally t;
    t.peer = host[i];
    t.sentToPeer = (int64_t)comm->ledger->p2pOps(i, P2pDirection::kSend);
    t.receivedFromPeer = (int64_t)comm->ledger->p2pOps(i, P2pDirection::kRecv);
    if (const auto page = PeerLedger::open(comm->commHash, host[i])) {
      t.peerSentHere = page->p2pOps(self, P2pDirection::kSend);
      t.peerReceivedHere = page->p2pOps(self, P2pDirection::kRecv);
    }
    tallies.push_back(t);
  }
  return describeP2pLaggards(tallies);
}

// The host mates whose pages say that no graph replay's kernel of theirs runs on the communicator.
std::string replayLaggardsOf(ncclComm* comm) {
  std::vector<int> idle;
  for (int r : hostMatesOf(comm)) {
    if (r == comm->rank) continue;
    const auto page = PeerLedger::open(comm->commHash, r);
    if (page && page->replayChannels(nullptr) == 0) idle.push_back(r);
  }
  return describeReplayLaggards(idle);
}

// The ranks behind this one in collectives issued, sends and receives posted or (`replay`: this
// rank waits in a graph replay) replays running, or what is known when none is.
std::string laggardsOf(ncclComm* comm, bool replay) {
  if (!comm->ledger) return "the other ranks' counts of collectives cannot be read (no shared memory)";
  const uint64_t mine = comm->ledger->collectives();
  std::vector<int64_t> peers(comm->nRanks, -1);
  for (int r = 0; r < comm->nRanks; ++r) {
    if (r != comm->rank) peers[r] = OpLedger::readPeer(comm->commHash, r);
  }
  std::string text = describeLaggards(comm->rank, mine, peers);
  const std::string p2p = p2pLaggardsOf(comm);
  if (!p2p.empty()) text += (text.empty() ? "" : "; ") + p2p;
  const std::string replays = replay ? replayLaggardsOf(comm) : "";
  if (!replays.empty()) text = replays + (text.empty() ? "" : "; " + text);
  if (text.empty()) {
    text = "no rank of this host has issued fewer collectives (" + std::to_string(mine) +
           ") or posted fewer sends or receives to this rank than it waits for; a peer may be slow";
  }
  return text;
}

// Whether the communicator's kernels have all finished: its last stream launch and, with
// `withGraphs`, the latest replay of a graph it was captured into, which only graphs ordered by
// NCCL_GRAPH_MIXING_SUPPORT (the default) record. Unknown when a query fails or unordered graphs
// were captured.
GpuWork gpuWorkOf(ncclComm* comm, bool withGraphs) {
  runtime::ScopedDevice device;
  bool finished = true;
  if (isError(device.set(comm->cudaDev)) || isError(runtime::eventQuery(comm->lastLaunchEvent, &finished))) {
    return GpuWork::Unknown;
  }
  if (!finished) return GpuWork::Running;
  if (!withGraphs || !comm->capturedLaunches.load(std::memory_order_acquire)) return GpuWork::Finished;
  if (viewReplays(comm->replayStamps, dev::kMaxChannels).running) return GpuWork::Running;
  if (!comm->graphsOrdered) return GpuWork::Unknown;
  if (isError(runtime::eventQuery(comm->graphLaunchEvent, &finished))) return GpuWork::Unknown;
  return finished ? GpuWork::Finished : GpuWork::Running;
}

// The communicator's graph replays as their stamps show them; copies the summary into this rank's
// ledger page (for its host mates' hang reports and weft-status), with the time the watchdog first
// saw these very stamps.
ReplayView lookAtReplays(Watched& w, double now) {
  ncclComm* comm = w.comm;
  if (!comm->capturedLaunches.load(std::memory_order_acquire)) return ReplayView{};
  const ReplayView v = viewReplays(comm->replayStamps, dev::kMaxChannels);
  if (v.token != w.replayToken || w.replaySince == 0) {
    w.replayToken = v.token;
    w.replaySince = now;
  }
  if (comm->ledger) comm->ledger->publishReplays(v.channels, (int64_t)(w.replaySince * 1000));
  return v;
}

// What has not finished: "this communicator's work (up to operation #N)" or, when only a graph
// replay's kernel runs, that kernel.
std::string unfinishedText(ncclComm* comm, GpuWork streamWork, const ReplayView& replays) {
  char text[160];
  if (streamWork == GpuWork::Finished && replays.running) {
    std::snprintf(text, sizeof(text), "the kernel of a CUDA graph replay (on %d channel%s)", replays.channels,
                  replays.channels == 1 ? "" : "s");
  } else {
    std::snprintf(text, sizeof(text), "this communicator's work (up to operation #%llu)",
                  (unsigned long long)comm->opCount());
  }
  return text;
}

// Looks at whether the communicator's work (stream launches and graph replays) has finished;
// reports and fails as decided.
void checkProgress(Watched& w, double now, double timeoutSec) {
  if (now - w.lastLook < kProgressLookSeconds || w.watch.anyStopped()) return;  // stopped peers: PeerWatch decides
  w.lastLook = now;
  const ReplayView replays = lookAtReplays(w, now);
  const double reportSec = (double)kHangReportSeconds.get();
  if (reportSec <= 0 && timeoutSec <= 0) return;  // both off: no CUDA call from this thread at all
  ncclComm* comm = w.comm;
  const GpuWork work = gpuWorkOf(comm, false);
  if (work == GpuWork::Unknown) return;
  const bool finished = work == GpuWork::Finished && !replays.running;
  const uint64_t progress = comm->opCount() ^ (replays.token * 0x9e3779b97f4a7c15ull);
  double quiet = 0;
  const auto verdict = w.progress.update(finished, progress, now, reportSec, timeoutSec, &quiet);
  if (verdict == ProgressWatch::kNothing) return;
  if (verdict == ProgressWatch::kFinishedAfterReport) {
    WEFT_WARN("rank %d: this communicator's work has finished after all", comm->rank);
    return;
  }
  const bool inReplay = work == GpuWork::Finished && replays.running;
  const std::string laggards = laggardsOf(comm, inReplay);
  const std::string what = unfinishedText(comm, work, replays);
  if (verdict == ProgressWatch::kReport) {
    WEFT_WARN("rank %d: %s has not finished for %.0f s, and no call has come since; %s. It fails after NCCL_TIMEOUT="
              "%.0f s of this (weft-status --comm %016llx shows every rank of this host)", comm->rank, what.c_str(),
              quiet, laggards.c_str(), timeoutSec, (unsigned long long)comm->commHash);
    return;
  }
  // The dump's path goes before the (unbounded) list of ranks behind, so a cut message keeps it.
  auto sentence = [&](const std::string& dumpPath) {
    std::string text(1024 + what.size() + dumpPath.size() + laggards.size(), '\0');  // room for every part
    const int n = std::snprintf(text.data(), text.size(), "rank %d: %s has not finished for %.0f s (NCCL_TIMEOUT%s%s); "
                                "%s. Its pending work is aborted; destroy or abort this communicator", comm->rank,
                                what.c_str(), quiet, dumpPath.empty() ? "" : "; this rank's state is in ",
                                dumpPath.c_str(), laggards.c_str());
    text.resize(std::clamp<size_t>(n < 0 ? 0 : (size_t)n, 0, text.size() - 1));
    return text;
  };
  const std::string dump = writeHangDump(comm, sentence(""));
  WEFT_WARN("%s", sentence(dump).c_str());
  const bool named = laggards.find("has issued") != std::string::npos || laggards.find("has posted") != std::string::npos ||
                     laggards.find("no kernel of a graph replay") != std::string::npos;
  failCommunicator(comm, named ? ncclRemoteError : ncclSystemError);
}

// A rank of this host found that a call differs between ranks (call_check.h): this rank fails too (its
// kernels may wait for the call the finder refused). True when it did.
bool reportFinding(Watched& w) {
  int finder = -1;
  std::string text;
  if (!w.comm->findings || !w.comm->findings->poll(&finder, &text)) return false;
  failOnFinding(w.comm, finder, text);
  return true;
}

// A peer has exited: once this rank's work has ended, fail the communicator quietly (most often the
// end of a job, ranks leaving one after the other; the next call must still not wait for the dead
// peer); if the work waits for the peer past the grace, warn and abort it.
void settlePeerExit(Watched& w, double now) {
  ncclComm* comm = w.comm;
  const PeerInfo& p = comm->peers[w.goneRank];
  const double grace = std::max<int64_t>(0, kPeerExitGraceMs.get()) / 1000.0;
  switch (judgePeerExit(gpuWorkOf(comm, true), now - w.goneAt, grace)) {
    case PeerExitVerdict::Wait:
      return;
    case PeerExitVerdict::Quiet: {
      char text[512];
      std::snprintf(text, sizeof(text), "rank %d: peer rank %d (pid %d on %s, GPU %s) has exited after this "
                    "communicator's work had finished; it can no longer complete collectives, so its next call "
                    "fails (ncclRemoteError). Destroy or abort it", comm->rank, w.goneRank, p.pid, p.hostName, p.busId);
      WEFT_INFO(log::kInit, "%s", text);
      failCommunicator(comm, ncclRemoteError, text);
      return;
    }
    case PeerExitVerdict::Fail:
      WEFT_WARN("rank %d: peer rank %d (pid %d on %s, GPU %s) has exited; this communicator (%d ranks) can no longer "
                "complete collectives. Its pending work is aborted; check rank %d's log for why it exited, then destroy "
                "or abort this communicator", comm->rank, w.goneRank, p.pid, p.hostName, p.busId, comm->nRanks,
                w.goneRank);
      failCommunicator(comm);
      return;
  }
}

void report(Watched& w, const PeerWatch::Event& e, double timeoutSec) {
  ncclComm* comm = w.comm;
  const PeerInfo& p = comm->peers[e.rank];
  switch (e.kind) {
    case PeerWatch::Event::Gone:
      w.goneRank = e.rank;
      w.goneAt = nowSeconds();
      settlePeerExit(w, w.goneAt);
      break;
    case PeerWatch::Event::StoppedTooLong: {
      char text[512];
      std::snprintf(text, sizeof(text), "rank %d: peer rank %d (pid %d on %s, GPU %s) has been stopped for %.0f s "
                    "(NCCL_TIMEOUT=%.0f); this communicator (%d ranks) gives up waiting for it and aborts its pending "
                    "work. Destroy or abort it", comm->rank, e.rank, p.pid, p.hostName, p.busId, e.seconds, timeoutSec,
                    comm->nRanks);
      const std::string dump = writeHangDump(comm, text);
      WEFT_WARN("%s%s%s", text, dump.empty() ? "" : " (this rank's state is in ", dump.empty() ? "" : (dump + ")").c_str());
      failCommunicator(comm);
      break;
    }
    case PeerWatch::Event::Stopped:
      WEFT_WARN("rank %d: peer rank %d (pid %d on %s) is stopped (SIGSTOP, SIGTSTP or a debugger); collectives with it "
                "wait until it continues%s", comm->rank, e.rank, p.pid, p.hostName,
                timeoutSec > 0 ? ", or fail after NCCL_TIMEOUT seconds of it" : " (NCCL_TIMEOUT=0: for as long as it takes)");
      break;
    case PeerWatch::Event::Continued:
      WEFT_WARN("rank %d: peer rank %d (pid %d) continues after %.1f s stopped", comm->rank, e.rank, p.pid, e.seconds);
      break;
  }
}

struct Watchdog {
  std::mutex mutex;
  std::vector<Watched> comms;
  bool started = false;
  bool exiting = false;  // the process is exiting: the CUDA runtime may be going away

  void loop() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(10, kIntervalMs.get())));
      std::lock_guard<std::mutex> lock(mutex);
      if (exiting) return;
      const double timeoutSec = (double)kPeerWaitTimeout.get();
      for (Watched& w : comms) check(w, timeoutSec);
    }
  }

  static void check(Watched& w, double timeoutSec) {
    publishMemory(w.comm);  // what it takes after creation: first-use connections, graph work, windows
    if (isError(w.comm->asyncError.load()) || w.comm->abortRequested.load()) return;
    if (w.goneRank >= 0) return settlePeerExit(w, nowSeconds());
    if (w.watch.over()) return;
    if (reportFinding(w)) return;
    std::vector<ProcessState> states(w.pids.size(), ProcessState::Running);
    for (size_t r = 0; r < w.pids.size(); ++r) {
      if (w.pids[r] != 0) states[r] = probeProcess(w.pids[r], w.starts[r]);
    }
    const double now = nowSeconds();
    for (const PeerWatch::Event& e : w.watch.update(states, now, timeoutSec)) report(w, e, timeoutSec);
    if (!w.watch.over() && !isError(w.comm->asyncError.load())) checkProgress(w, now, timeoutSec);
  }
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog();  // never destroyed: its thread runs until the process ends
  return *w;
}

// Registered when the thread starts, after CUDA's own exit handlers (CUDA was initialized by then),
// so it runs before them: the thread makes no CUDA call once the process is exiting.
void stopAtExit() {
  Watchdog& wd = watchdog();
  std::lock_guard<std::mutex> lock(wd.mutex);
  wd.exiting = true;
}

}  // namespace

uint64_t processStartFromStat(const std::string& statText) {
  std::vector<std::string> f;
  if (!fieldsAfterName(statText, &f) || f.size() < 20) return 0;
  return std::strtoull(f[19].c_str(), nullptr, 10);  // field 22; f[0] is field 3
}

ProcessState processStateFromStat(const std::string& statText, uint64_t expectedStart) {
  std::vector<std::string> f;
  if (!fieldsAfterName(statText, &f)) return ProcessState::Running;
  const char state = f[0][0];
  if (state == 'Z' || state == 'X' || state == 'x') return ProcessState::Gone;
  const uint64_t start = processStartFromStat(statText);
  if (expectedStart != 0 && start != 0 && start != expectedStart) return ProcessState::Gone;
  if (state == 'T' || state == 't') return ProcessState::Stopped;
  return ProcessState::Running;
}

std::string readProcStat(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string text;
  std::getline(in, text);
  return text;
}

ProcessState probeProcess(pid_t pid, uint64_t expectedStart) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return ProcessState::Gone;
  // /proc may hide other users' processes (hidepid): then only kill() speaks, and it says alive.
  return processStateFromStat(readProcStat(std::to_string(pid)), expectedStart);
}

std::vector<PeerWatch::Event> PeerWatch::update(const std::vector<ProcessState>& states, double now,
                                                double timeoutSec) {
  std::vector<Event> events;
  if (over_) return events;
  for (size_t r = 0; r < states.size() && r < watched_.size(); ++r) {
    if (!watched_[r]) continue;
    const int rank = (int)r;
    if (states[r] == ProcessState::Gone) {
      events.push_back({Event::Gone, rank, 0});
      over_ = true;
      return events;
    }
    const bool wasStopped = stoppedSince_[r] >= 0;
    if (states[r] == ProcessState::Stopped) {
      if (!wasStopped) {
        stoppedSince_[r] = now;
        events.push_back({Event::Stopped, rank, 0});
      } else if (timeoutSec > 0 && now - stoppedSince_[r] > timeoutSec) {
        events.push_back({Event::StoppedTooLong, rank, now - stoppedSince_[r]});
        over_ = true;
        return events;
      }
    } else if (wasStopped) {
      events.push_back({Event::Continued, rank, now - stoppedSince_[r]});
      stoppedSince_[r] = -1;
    }
  }
  return events;
}

bool PeerWatch::anyStopped() const {
  return std::any_of(stoppedSince_.begin(), stoppedSince_.end(), [](double t) { return t >= 0; });
}

PeerExitVerdict judgePeerExit(GpuWork work, double sinceExit, double graceSec) {
  if (work == GpuWork::Finished) return PeerExitVerdict::Quiet;
  return sinceExit >= graceSec ? PeerExitVerdict::Fail : PeerExitVerdict::Wait;
}

ReplayView viewReplays(const volatile uint64_t* stamps, int count) {
  ReplayView v;
  for (int c = 0; c < count; ++c) {
    const uint64_t stamp = stamps[c];
    v.channels += stamp != 0;
    v.token = (v.token ^ stamp) * 0x100000001b3ull;  // FNV-style: a start time moved to another channel changes it
  }
  v.running = v.channels > 0;
  return v;
}

ProgressWatch::Verdict ProgressWatch::update(bool finished, uint64_t progress, double now, double reportSec,
                                             double timeoutSec, double* quietFor) {
  *quietFor = 0;
  if (over_) return kNothing;
  if (finished) {
    const bool wasReported = reported_;
    quietSince_ = -1;
    reported_ = false;
    return wasReported ? kFinishedAfterReport : kNothing;
  }
  if (quietSince_ < 0 || progress != progress_) {  // unfinished work seen for the first time, or a move since
    progress_ = progress;
    quietSince_ = now;
    reported_ = false;
    return kNothing;
  }
  *quietFor = now - quietSince_;
  if (timeoutSec > 0 && *quietFor >= timeoutSec) {
    over_ = true;
    return kFail;
  }
  if (!reported_ && reportSec > 0 && *quietFor >= reportSec) {
    reported_ = true;
    return kReport;
  }
  return kNothing;
}

void publishMemory(ncclComm* comm) {
  if (!comm->ledger) return;
  const runtime::MemTally& t = *comm->memTally;
  comm->ledger->publishMemory(LedgerMemory{t.bytes(runtime::MemPlace::kGpu), t.bytes(runtime::MemPlace::kPinned),
                                           t.bytes(runtime::MemPlace::kShared)});
}

void watchCommunicator(ncclComm* comm) {
  const int n = comm->nRanks;
  std::vector<pid_t> pids(n, 0);
  std::vector<uint64_t> starts(n, 0);
  std::vector<bool> watched(n, false);
  const PeerInfo& me = comm->peers[comm->rank];
  for (int r = 0; r < n; ++r) {
    const PeerInfo& p = comm->peers[r];
    if (p.hostHash != me.hostHash || p.processHash == me.processHash) continue;
    if (p.pidNamespace != me.pidNamespace || me.pidNamespace == 0) {
      WEFT_INFO(log::kInit, "rank %d: peer rank %d runs in another pid namespace (a container?); its exit is not "
                "watched here", comm->rank, r);
      continue;
    }
    pids[r] = p.pid;
    starts[r] = p.processStart;
    watched[r] = true;
  }
  if (n < 2) return;
  Watchdog& wd = watchdog();
  std::lock_guard<std::mutex> lock(wd.mutex);
  wd.comms.push_back(Watched{comm, std::move(pids), std::move(starts), PeerWatch(std::move(watched)), {}, 0});
  if (!wd.started) {  // (a detached std::thread is no longer joinable(): a flag of its own)
    wd.started = true;
    std::atexit(stopAtExit);
    std::thread([&wd] { wd.loop(); }).detach();
  }
}

void unwatchCommunicator(ncclComm* comm) {
  Watchdog& wd = watchdog();
  std::lock_guard<std::mutex> lock(wd.mutex);
  wd.comms.erase(std::remove_if(wd.comms.begin(), wd.comms.end(), [comm](const Watched& w) { return w.comm == comm; }),
                 wd.comms.end());
}

}  // namespace weft::core
