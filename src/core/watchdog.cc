#include "core/watchdog.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/comm_init.h"
#include "core/communicator.h"
#include "core/param.h"
#include "core/peer_info.h"

namespace weft::core {
namespace {

const param::IntParam kIntervalMs{"NCCL_WEFT_WATCHDOG_INTERVAL_MS", 100};

struct Watched {
  ncclComm* comm;
  std::vector<pid_t> pids;  // per rank: pid of a peer process on this host, else 0
};

struct Watchdog {
  std::mutex mutex;
  std::vector<Watched> comms;
  std::thread thread;

  void loop() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(10, kIntervalMs.get())));
      std::lock_guard<std::mutex> lock(mutex);
      for (Watched& w : comms) check(w);
    }
  }

  static void check(Watched& w) {
    if (isError(w.comm->asyncError.load())) return;
    std::vector<bool> alive(w.pids.size(), true);
    for (size_t r = 0; r < w.pids.size(); ++r) {
      if (w.pids[r] != 0 && kill(w.pids[r], 0) != 0 && errno == ESRCH) alive[r] = false;
    }
    int dead = firstDeadPeer(w.pids, alive);
    if (dead < 0) return;
    const PeerInfo& p = w.comm->peers[dead];
    WEFT_WARN("rank %d: peer rank %d (pid %d on %s, GPU %s) has exited; this communicator (%d ranks) can no longer "
              "complete collectives. Its pending work is aborted; check rank %d's log for why it exited, then destroy "
              "or abort this communicator", w.comm->rank, dead, p.pid, p.hostName, p.busId, w.comm->nRanks, dead);
    w.comm->setLastError(log::lastErrorOfThread());
    w.comm->asyncError.store(ncclRemoteError);
    requestAbort(w.comm);
  }
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog();  // never destroyed: its thread runs until the process ends
  return *w;
}

}  // namespace

int firstDeadPeer(const std::vector<pid_t>& pids, const std::vector<bool>& alive) {
  for (size_t r = 0; r < pids.size(); ++r) {
    if (pids[r] != 0 && !alive[r]) return (int)r;
  }
  return -1;
}

void watchCommunicator(ncclComm* comm) {
  Watched w{comm, std::vector<pid_t>(comm->nRanks, 0)};
  bool any = false;
  const PeerInfo& me = comm->peers[comm->rank];
  for (int r = 0; r < comm->nRanks; ++r) {
    const PeerInfo& p = comm->peers[r];
    if (p.hostHash == me.hostHash && p.processHash != me.processHash) {
      w.pids[r] = p.pid;
      any = true;
    }
  }
  if (!any) return;
  Watchdog& wd = watchdog();
  std::lock_guard<std::mutex> lock(wd.mutex);
  wd.comms.push_back(std::move(w));
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
