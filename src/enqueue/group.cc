#include "enqueue/group.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "core/call_check.h"
#include "core/communicator.h"
#include "core/log.h"
#include "enqueue/launch.h"

namespace weft::enqueue {
namespace {

struct InitJob {
  std::function<Status()> run;
  bool blocking;
  const void* serialKey = nullptr;  // jobs with one key run one after the other, in order
};

// Where a communicator's published calls stood when it joined the group (core::OpLedger::Mark).
using LedgerMark = std::pair<ncclComm*, core::OpLedger::Mark>;

struct GroupState {
  int depth = 0;
  Status error = ncclSuccess;
  std::string cause;             // the failed call's warning, repeated by ncclGroupEnd
  std::vector<ncclComm*> comms;  // communicators with queued tasks, in first-use order
  std::vector<LedgerMark> marks;  // of those with a ledger
  std::vector<InitJob> inits;
  std::vector<InitJob> finalizes;
  std::vector<std::pair<ncclComm*, std::function<void()>>> aborts;
};

thread_local GroupState tGroup;

// Runs deferred communicator jobs (creations, finalizations) concurrently, since each waits for
// its peers, and joins them. A non-blocking job only starts its own thread and answers ncclInProgress.
Status runJobs(std::vector<InitJob> jobs) {
  if (jobs.empty()) return ncclSuccess;
  std::vector<Status> results(jobs.size(), ncclSuccess);
  // One lane per key (a communicator's window registrations share its bootstrap: one at a time,
  // in call order); a job without a key gets a lane of its own.
  std::vector<std::vector<size_t>> lanes;
  for (size_t i = 0; i < jobs.size(); ++i) {
    size_t lane = lanes.size();
    for (size_t l = 0; l < lanes.size() && jobs[i].serialKey != nullptr; ++l)
      if (jobs[lanes[l][0]].serialKey == jobs[i].serialKey) lane = l;
    if (lane == lanes.size()) lanes.emplace_back();
    lanes[lane].push_back(i);
  }
  auto runLane = [&results, &jobs](const std::vector<size_t>& lane) {
    for (size_t i : lane) results[i] = jobs[i].run();
  };
  if (lanes.size() == 1) {
    runLane(lanes[0]);
  } else {
    std::vector<std::thread> threads;
    for (const auto& lane : lanes) threads.emplace_back(runLane, std::cref(lane));
    for (auto& t : threads) t.join();
  }
  bool pending = false;
  for (Status s : results) {
    if (isError(s)) return s;
    pending = pending || s == ncclInProgress;
  }
  return pending ? ncclInProgress : ncclSuccess;
}

// Drops the queued tasks, and takes their calls back out of the ledgers: the other ranks must
// not compare their calls with ones that never ran (the calls made instead get those numbers).
void dropQueued(const std::vector<ncclComm*>& comms, const std::vector<LedgerMark>& marks) {
  for (ncclComm* comm : comms) comm->tasks.clear();
  for (const LedgerMark& m : marks) m.first->ledger->retract(m.second);
}

// The arguments of a collective task that every rank must pass alike.
core::CallSignature callOf(const Task& t) {
  core::CallSignature c;
  switch (t.kind) {
    case TaskKind::kBroadcast: c.call = core::kCallBroadcast; break;
    case TaskKind::kReduce: c.call = core::kCallReduce; break;
    case TaskKind::kAllGather: c.call = core::kCallAllGather; break;
    case TaskKind::kReduceScatter: c.call = core::kCallReduceScatter; break;
    default: c.call = core::kCallAllReduce; break;
  }
  c.dataType = (uint8_t)t.dataType;
  c.redOp = t.kind == TaskKind::kBroadcast || t.kind == TaskKind::kAllGather ? core::kNoRedOp : t.callRedOp;
  c.root = t.kind == TaskKind::kBroadcast || t.kind == TaskKind::kReduce ? t.root : -1;
  c.count = t.count;
  return c;
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

Status groupStart() {
  tGroup.depth++;
  return ncclSuccess;
}

// The group's aborts (every flag is raised by now): their communicators leave the group, with their
// queued work and ledger marks, then go.
static void runAborts(GroupState* group) {
  if (group->aborts.empty()) return;
  for (auto& [comm, destroy] : group->aborts) {
    comm->tasks.clear();
    group->comms.erase(std::remove(group->comms.begin(), group->comms.end(), comm), group->comms.end());
    group->marks.erase(std::remove_if(group->marks.begin(), group->marks.end(),
                                      [c = comm](const LedgerMark& m) { return m.first == c; }),
                       group->marks.end());
  }
  for (auto& abort : group->aborts) abort.second();
  group->aborts.clear();
}

// Closes one group level for `fn`. At the outermost level: takes the group's state, reports an
// earlier failure, runs the deferred communicator creations (real even when the collectives are
// only simulated) and returns true in *outermost with the communicators that have tasks and the
// deferred finalizations.
static Status closeGroup(const char* fn, const char* dropped, bool* outermost, std::vector<ncclComm*>* comms,
                         std::vector<InitJob>* finalizes = nullptr, std::vector<LedgerMark>* marks = nullptr) {
  *outermost = false;
  if (tGroup.depth == 0) {
    WEFT_WARN("%s: not inside a group (ncclGroupStart was not called, or %s was called once too often)", fn, fn);
    return ncclInvalidUsage;
  }
  if (--tGroup.depth > 0) return ncclSuccess;
  GroupState group = std::move(tGroup);
  tGroup = GroupState();
  runAborts(&group);
  if (isError(group.error)) {
    dropQueued(group.comms, group.marks);
    WEFT_WARN("%s: an earlier call in this group failed (%s: %s); %s", fn, ncclGetErrorString(group.error),
              group.cause.empty() ? "see the warning before" : group.cause.c_str(), dropped);
    return group.error;
  }
  Status initStatus = runJobs(std::move(group.inits));
  if (isError(initStatus)) {
    dropQueued(group.comms, group.marks);
    return initStatus;
  }
  *outermost = true;
  *comms = std::move(group.comms);
  if (finalizes) *finalizes = std::move(group.finalizes);
  if (marks) *marks = std::move(group.marks);
  return initStatus;
}

Status groupEnd() {
  bool outermost = false;
  std::vector<ncclComm*> comms;
  std::vector<InitJob> finalizes;
  Status status = closeGroup("ncclGroupEnd", "nothing in the group was launched", &outermost, &comms, &finalizes);
  if (!outermost) return status;
  WEFT_TRY(launchQueued(comms.data(), comms.size()));
  Status finalizeStatus = runJobs(std::move(finalizes));
  if (isError(finalizeStatus)) return finalizeStatus;
  return status == ncclInProgress ? status : finalizeStatus;
}

Status groupSimulateEnd(ncclSimInfo_t* simInfo) {
  bool outermost = false;
  std::vector<ncclComm*> comms;
  std::vector<LedgerMark> marks;
  Status status = closeGroup("ncclGroupSimulateEnd", "nothing was estimated", &outermost, &comms, nullptr, &marks);
  if (!outermost) return status;
  // Each communicator runs its tasks one after the other; different communicators (GPUs) run
  // side by side, so the group takes as long as its slowest communicator.
  double slowest = 0;
  Status estimated = ncclSuccess;
  for (ncclComm* comm : comms) {
    double us = 0;
    Status s = estimateQueuedMicroseconds(comm, &us);
    if (isError(s) && !isError(estimated)) estimated = s;
    slowest = std::max(slowest, us);
  }
  dropQueued(comms, marks);  // estimated, never run
  if (isError(estimated)) return estimated;
  simInfo->estimatedTime = (float)slowest;
  return status;
}

void joinGroup(ncclComm* comm) {
  if (tGroup.depth == 0 || std::find(tGroup.comms.begin(), tGroup.comms.end(), comm) != tGroup.comms.end()) return;
  tGroup.comms.push_back(comm);
  if (comm->ledger) tGroup.marks.emplace_back(comm, comm->ledger->mark());
}

Status enqueueTask(ncclComm* comm, const Task& task) {
  joinGroup(comm);  // before the call is published
  if (!task.isP2p()) {
    WEFT_TRY(core::noteCollectiveCall(comm, callOf(task)));
  } else {
    core::P2pSignature op;
    op.count = task.count;
    op.dataType = (uint8_t)task.dataType;
    WEFT_TRY(core::noteP2pCall(
        comm, task.peer, task.kind == TaskKind::kSend ? core::P2pDirection::kSend : core::P2pDirection::kRecv, op));
  }
  if (tGroup.depth == 0) {
    comm->tasks.push_back(task);
    Status s = launchQueued(&comm, 1);
    if (isError(s)) comm->tasks.clear();
    return s;
  }
  comm->tasks.push_back(task);
  return ncclSuccess;
}

void deferInit(std::function<Status()> job, bool blocking) {
  tGroup.inits.push_back({std::move(job), blocking, nullptr});
}

void deferInOrder(std::function<Status()> job, const void* serialKey) {
  tGroup.inits.push_back({std::move(job), true, serialKey});
}

void deferFinalize(std::function<Status()> job, bool blocking) {
  tGroup.finalizes.push_back({std::move(job), blocking});
}

void deferAbort(ncclComm* comm, std::function<void()> destroy) {
  for (const auto& a : tGroup.aborts)
    if (a.first == comm) return;  // aborted twice in one group: once is enough
  tGroup.aborts.emplace_back(comm, std::move(destroy));
}

void failGroup(Status error) {
  if (tGroup.depth > 0 && !isError(tGroup.error)) {
    tGroup.error = error;
    tGroup.cause = log::lastErrorOfThread();  // the failed call has just warned
  }
}

}  // namespace weft::enqueue
