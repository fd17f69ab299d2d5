// Watches the peer processes of live communicators on this host, so that nothing waits forever on
// a peer that is gone or stopped:
//   - a peer process that exits (or is a zombie, or whose pid now names another process) fails every
//     communicator that talks to it with ncclRemoteError and an error naming that rank; its kernels
//     are told to stop;
//   - a peer process that is stopped (SIGSTOP, SIGTSTP, a debugger) is reported once, and again when
//     it continues; stopped for longer than NCCL_TIMEOUT seconds (0: never) it fails the
//     communicator the same way, with a message that says "stopped", not "exited".
//   - work that has not finished for NCCL_WEFT_HANG_REPORT_SECONDS while no call came (the
//     application waits for it) is reported, naming the ranks that have issued fewer collectives
//     (core/op_ledger.h); unfinished for NCCL_TIMEOUT seconds, it fails the communicator. Stream
//     launches are watched through their events, CUDA graph replays through the stamps their
//     kernels' blocks leave in host memory (dev::DevKernelArgs::replayStamps): a replay whose
//     kernel stops moving is caught, replays that follow each other are not mistaken for one.
//   - a peer that exits while this communicator has no unfinished work (the end of a job: it may
//     have done its part of the last collective while this rank's kernel still finishes, so that
//     work gets NCCL_WEFT_PEER_EXIT_GRACE_MS to end) is logged at INFO, not warned about; the
//     communicator still fails, so its next call does not wait for the dead peer.
// One thread per process, started by the first communicator of more than one rank. Only peers in
// this pid namespace are probed (a peer's pid means nothing in another namespace).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/param.h"

struct ncclComm;

namespace weft::core {

// Seconds a host thread waits for earlier kernels, and a stopped peer is waited for (0: forever).
extern const param::IntParam kPeerWaitTimeout;

// Copies the memory the communicator holds into its ledger page (weft-status shows it); the
// watchdog does so at every round.
void publishMemory(ncclComm* comm);
void watchCommunicator(ncclComm* comm);
void unwatchCommunicator(ncclComm* comm);

enum class ProcessState { Running, Stopped, Gone };

// Pure, for tests: field 22 of a /proc/<pid>/stat text (start time in clock ticks after boot), or
// 0 when the text is malformed. The command name (field 2) may hold spaces and parentheses.
uint64_t processStartFromStat(const std::string& statText);
// Pure: the state a /proc/<pid>/stat text describes. Zombies and dead entries are Gone, and so is a
// process whose start time differs from `expectedStart` (the pid was reused; 0 = not known).
// Unparsable text says nothing: Running.
ProcessState processStateFromStat(const std::string& statText, uint64_t expectedStart);
// The text of /proc/<pid>/stat ("self" for this process), or "" when it cannot be read.
std::string readProcStat(const std::string& pid);
// A process of this host, looked at now: kill(pid, 0), then /proc/<pid>/stat when readable.
ProcessState probeProcess(pid_t pid, uint64_t expectedStart);

// The watchdog's decisions for one communicator, apart from the communicator (unit-tested).
class PeerWatch {
 public:
  struct Event {
    enum Kind { Stopped, Continued, Gone, StoppedTooLong } kind;
    int rank;
    double seconds;  // Continued, StoppedTooLong: how long the peer had been stopped
  };
  // `watched[r]`: rank r is a peer process of this host whose state can be probed.
  explicit PeerWatch(std::vector<bool> watched) : watched_(std::move(watched)), stoppedSince_(watched_.size(), -1) {}
  // One look at every rank's state at time `now` (seconds); `timeoutSec` <= 0: a stopped peer is
  // waited for forever. Returns what changed, in rank order; after a Gone or StoppedTooLong event
  // the watch is over and later calls return nothing.
  std::vector<Event> update(const std::vector<ProcessState>& states, double now, double timeoutSec);
  bool over() const { return over_; }
  bool anyStopped() const;

 private:
  std::vector<bool> watched_;
  std::vector<double> stoppedSince_;  // per rank: when it was first seen stopped, or -1
  bool over_ = false;
};

// What a communicator's kernels are doing, as its events tell.
enum class GpuWork { Finished, Running, Unknown };

// A watched peer has exited `sinceExit` seconds ago (pure, unit-tested): Quiet once this rank's
// work has finished (fail the communicator without a warning), Fail once `graceSec` has passed
// with the work unfinished or unknown (it waits for the dead peer), else Wait.
enum class PeerExitVerdict { Wait, Quiet, Fail };
PeerExitVerdict judgePeerExit(GpuWork work, double sinceExit, double graceSec);

// A communicator's graph-replay kernels as their blocks' stamps show them (pure, unit-tested):
// `running` when any channel's word holds a start time, `channels` how many do; `token` changes
// whenever a block starts or ends.
struct ReplayView {
  bool running = false;
  int channels = 0;
  uint64_t token = 0;
};
ReplayView viewReplays(const volatile uint64_t* stamps, int count);

// The watchdog's decisions about one communicator's progress (unit-tested). Its work is "quiet"
// while it is unfinished and `progress` stays the same; a new call (or a replay's kernel starting)
// restarts the clock.
class ProgressWatch {
 public:
  enum Verdict { kNothing, kReport, kFail, kFinishedAfterReport };
  // `finished`: all work launched so far has completed; `progress`: a number that changes whenever
  // something moves (operations asked for, replay stamps); `reportSec` <= 0: never report;
  // `timeoutSec` <= 0: never fail. *quietFor: seconds quiet.
  Verdict update(bool finished, uint64_t progress, double now, double reportSec, double timeoutSec, double* quietFor);

 private:
  uint64_t progress_ = 0;
  double quietSince_ = -1;
  bool reported_ = false;
  bool over_ = false;
};

}  // namespace weft::core
