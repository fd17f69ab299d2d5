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

#include "core/comm_init.h"
#include "core/communicator.h"
#include "core/peer_info.h"

namespace weft::core {

const param::IntParam kPeerWaitTimeout{"NCCL_TIMEOUT", 1800};

namespace {

const param::IntParam kIntervalMs{"NCCL_WEFT_WATCHDOG_INTERVAL_MS", 100};

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
};

void failCommunicator(ncclComm* comm) {
  comm->setLastError(log::lastErrorOfThread());
  comm->asyncError.store(ncclRemoteError);
  requestAbort(comm);
}

void report(Watched& w, const PeerWatch::Event& e, double timeoutSec) {
  ncclComm* comm = w.comm;
  const PeerInfo& p = comm->peers[e.rank];
  switch (e.kind) {
    case PeerWatch::Event::Gone:
      WEFT_WARN("rank %d: peer rank %d (pid %d on %s, GPU %s) has exited; this communicator (%d ranks) can no longer "
                "complete collectives. Its pending work is aborted; check rank %d's log for why it exited, then destroy "
                "or abort this communicator", comm->rank, e.rank, p.pid, p.hostName, p.busId, comm->nRanks, e.rank);
      failCommunicator(comm);
      break;
    case PeerWatch::Event::StoppedTooLong:
      WEFT_WARN("rank %d: peer rank %d (pid %d on %s, GPU %s) has been stopped for %.0f s (NCCL_TIMEOUT=%.0f); this "
                "communicator (%d ranks) gives up waiting for it and aborts its pending work. Destroy or abort it",
                comm->rank, e.rank, p.pid, p.hostName, p.busId, e.seconds, timeoutSec, comm->nRanks);
      failCommunicator(comm);
      break;
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
  std::thread thread;

  void loop() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(10, kIntervalMs.get())));
      std::lock_guard<std::mutex> lock(mutex);
      const double timeoutSec = (double)kPeerWaitTimeout.get();
      for (Watched& w : comms) check(w, timeoutSec);
    }
  }

  static void check(Watched& w, double timeoutSec) {
    if (w.watch.over() || isError(w.comm->asyncError.load())) return;
    std::vector<ProcessState> states(w.pids.size(), ProcessState::Running);
    for (size_t r = 0; r < w.pids.size(); ++r) {
      if (w.pids[r] != 0) states[r] = probeProcess(w.pids[r], w.starts[r]);
    }
    for (const PeerWatch::Event& e : w.watch.update(states, nowSeconds(), timeoutSec)) report(w, e, timeoutSec);
  }
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog();  // never destroyed: its thread runs until the process ends
  return *w;
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

void watchCommunicator(ncclComm* comm) {
  const int n = comm->nRanks;
  std::vector<pid_t> pids(n, 0);
  std::vector<uint64_t> starts(n, 0);
  std::vector<bool> watched(n, false);
  bool any = false;
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
    any = true;
  }
  if (!any) return;
  Watchdog& wd = watchdog();
  std::lock_guard<std::mutex> lock(wd.mutex);
  wd.comms.push_back(Watched{comm, std::move(pids), std::move(starts), PeerWatch(std::move(watched))});
  if (!wd.thread.joinable()) {
    wd.thread = std::thread([&wd] { wd.loop(); });
    wd.thread.detach();
  }
}

void unwatchCommunicator(ncclComm* comm) {
  Watchdog& wd = watchdog();
  std::lock_guard<std::mutex> lock(wd.mutex);
  wd.comms.erase(std::remove_if(wd.comms.begin(), wd.comms.end(), [comm](const Watched& w) { return w.comm == comm; }),
                 wd.comms.end());
}

}  // namespace weft::core
