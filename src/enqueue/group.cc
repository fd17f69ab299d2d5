#include "enqueue/group.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "core/call_check.h"
#include "core/catching.h"
#include "core/communicator.h"
#include "core/log.h"
#include "enqueue/launch.h"

namespace weft::enqueue {
namespace {

struct DeferredJob {
  std::function<Status()> run;
  bool blocking;
  ncclComm* subject = nullptr;        // what it creates, finalizes or works on (group.h)
  const ncclComm* channel = nullptr;  // whose bootstrap it talks over: one at a time, in call order
};

// A deferred ncclCommAbort or ncclCommDestroy: the communicator and what frees it.
using DeferredEnd = std::pair<ncclComm*, std::function<void()>>;

// Where a communicator's published calls stood when it joined the group (core::OpLedger::Mark).
using LedgerMark = std::pair<ncclComm*, core::OpLedger::Mark>;

struct GroupState {
  int depth = 0;
  Status error = ncclSuccess;
  std::string cause;             // the failed call's warning, repeated by ncclGroupEnd
  std::vector<ncclComm*> comms;  // communicators with queued tasks, in first-use order
  std::vector<LedgerMark> marks;  // of those with a ledger
  std::vector<DeferredJob> inits;
  std::vector<DeferredJob> finalizes;
  std::vector<DeferredEnd> aborts;
  std::vector<DeferredEnd> destroys;
};

thread_local GroupState tGroup;

// Runs deferred communicator jobs (creations, finalizations) concurrently, since each waits for
// its peers, and joins them. A non-blocking job only starts its own thread and answers ncclInProgress.
Status runJobs(const std::vector<DeferredJob>& jobs) {
  if (jobs.empty()) return ncclSuccess;
  std::vector<Status> results(jobs.size(), ncclSuccess);
  // One lane per channel (jobs sharing a bootstrap run one at a time, in call order); a job
  // without one gets a lane of its own.
  std::vector<std::vector<size_t>> lanes;
  for (size_t i = 0; i < jobs.size(); ++i) {
    size_t lane = lanes.size();
    for (size_t l = 0; l < lanes.size() && jobs[i].channel != nullptr; ++l)
      if (jobs[lanes[l][0]].channel == jobs[i].channel) lane = l;
    if (lane == lanes.size()) lanes.emplace_back();
    lanes[lane].push_back(i);
  }
  auto runLane = [&results, &jobs](const std::vector<size_t>& lane) {
    // A lane's thread must not end the process (std::terminate) on an exception.
    for (size_t i : lane) results[i] = core::callCatching("a communicator job of ncclGroupEnd", jobs[i].run);
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

// Jobs that will never run: a subject still waiting for one (ncclInProgress) takes the error
// instead, with `why` as its last error.
void reportNeverRan(const std::vector<DeferredJob>& jobs, Status error, const std::string& why) {
  for (const DeferredJob& job : jobs) {
    ncclComm* comm = job.subject;
    if (comm == nullptr || comm->asyncError.load() != ncclInProgress) continue;
    WEFT_WARN("rank %d: %s", comm->rank, why.c_str());
    comm->setLastError(why.c_str());
    comm->asyncError.store(error);
  }
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

int groupDepth() { return tGroup.depth; }

Status groupStart() {
  tGroup.depth++;
  return ncclSuccess;
}

// Moves the jobs that touch `comm` (as subject or channel) from *jobs to *dropped.
static void takeJobsOf(const ncclComm* comm, std::vector<DeferredJob>* jobs, std::vector<DeferredJob>* dropped) {
  auto keeps = [comm](const DeferredJob& j) { return j.subject != comm && j.channel != comm; };
  auto split = std::stable_partition(jobs->begin(), jobs->end(), keeps);
  std::move(split, jobs->end(), std::back_inserter(*dropped));
  jobs->erase(split, jobs->end());
}

// The group's aborts (every flag is raised by now): their communicators leave the group, with their
// queued work, ledger marks, deferred jobs (and the jobs over their bootstraps) and a destroy of the
// same group, then go.
static void runAborts(GroupState* group) {
  if (group->aborts.empty()) return;
  std::vector<DeferredJob> dropped;
  for (auto& [comm, destroy] : group->aborts) {
    comm->tasks.clear();
    group->comms.erase(std::remove(group->comms.begin(), group->comms.end(), comm), group->comms.end());
    group->marks.erase(std::remove_if(group->marks.begin(), group->marks.end(),
                                      [c = comm](const LedgerMark& m) { return m.first == c; }),
                       group->marks.end());
    group->destroys.erase(std::remove_if(group->destroys.begin(), group->destroys.end(),
                                         [c = comm](const DeferredEnd& d) { return d.first == c; }),
                          group->destroys.end());
    takeJobsOf(comm, &group->inits, &dropped);
    takeJobsOf(comm, &group->finalizes, &dropped);
  }
  for (auto& abort : group->aborts) {
    // A job's subject that is itself being aborted goes now; the others (children of an aborted
    // parent) are told why they never came to be.
    dropped.erase(std::remove_if(dropped.begin(), dropped.end(), [c = abort.first](const DeferredJob& j) {
                    return j.subject == c;
                  }),
                  dropped.end());
  }
  reportNeverRan(dropped, ncclInvalidUsage,
                 "this communicator's creation never ran: a communicator it needed (its parent) was aborted with "
                 "ncclCommAbort in the same group");
  for (auto& abort : group->aborts) abort.second();
  group->aborts.clear();
}

// Closes one group level for `fn`. At the outermost level returns true in *outermost and moves
// the group's state to *group.
static Status closeLevel(const char* fn, bool* outermost, GroupState* group) {
  *outermost = false;
  if (tGroup.depth == 0) {
    WEFT_WARN("%s: not inside a group (ncclGroupStart was not called, or %s was called once too often)", fn, fn);
    return ncclInvalidUsage;
  }
  if (--tGroup.depth > 0) return ncclSuccess;
  *group = std::move(tGroup);
  tGroup = GroupState();
  *outermost = true;
  return ncclSuccess;
}

// The outermost level's end. A group that failed on a call runs nothing (as NCCL). Otherwise: its
// aborts, the deferred creations, `launch` (the real launch, or the estimate of
// ncclGroupSimulateEnd), the finalizations, and the destroys last (also after a failed job or
// launch). Jobs that never ran report it to their subjects.
static Status finishGroup(const char* fn, const char* dropped, GroupState& group,
                          const std::function<Status(GroupState&)>& launch) {
  Status status = group.error;
  bool pending = false, launched = false;
  std::string reason;
  if (isError(status)) {
    // As NCCL: nothing of the group runs, not even its ncclCommDestroy and ncclCommAbort calls, so
    // their handles stay valid (the caller cleans up after a failed group; freeing them here would
    // make that a use after free). Aborted communicators keep their raised flags.
    WEFT_WARN("%s: an earlier call in this group failed (%s: %s); %s%s", fn, ncclGetErrorString(status),
              group.cause.empty() ? "see the warning before" : group.cause.c_str(), dropped,
              group.aborts.empty() && group.destroys.empty()
                  ? "" : ", and its ncclCommDestroy/ncclCommAbort calls did not run: call them again");
    reason = std::string("another call of its group failed (") + ncclGetErrorString(status) +
             (group.cause.empty() ? ")" : ": " + group.cause + ")");
    group.destroys.clear();
    for (auto& abort : group.aborts) abort.first->tasks.clear();
    group.aborts.clear();
  } else {
    runAborts(&group);
    status = runJobs(group.inits);
    group.inits.clear();
    pending = status == ncclInProgress;
    if (isError(status)) {
      reason = std::string("a deferred job of its group (a creation, split, shrink, window or device communicator) "
                           "failed (") + ncclGetErrorString(status) + ")";
    } else {
      launched = true;
      status = launch(group);
      if (isError(status)) reason = std::string("the group's launch failed (") + ncclGetErrorString(status) + ")";
    }
  }
  if (isError(status)) {
    if (!launched) dropQueued(group.comms, group.marks);
    reportNeverRan(group.inits, status, "its creation never ran at " + std::string(fn) + ": " + reason);
    reportNeverRan(group.finalizes, status, "ncclCommFinalize never ran at " + std::string(fn) + ": " + reason);
  } else {
    status = runJobs(group.finalizes);
    pending = pending || status == ncclInProgress;
  }
  for (auto& destroy : group.destroys) destroy.second();
  if (isError(status)) return status;
  return pending ? ncclInProgress : ncclSuccess;
}

Status groupEnd() {
  bool outermost = false;
  GroupState group;
  Status status = closeLevel("ncclGroupEnd", &outermost, &group);
  if (!outermost) return status;
  return finishGroup("ncclGroupEnd", "nothing in the group was launched", group, [](GroupState& g) -> Status {
    std::vector<ncclComm*> untouched;
    Status s = launchQueued(g.comms.data(), g.comms.size(), &untouched);
    // Communicators that put nothing on a stream take their calls back (as a failed group's).
    for (const LedgerMark& m : g.marks)
      if (std::find(untouched.begin(), untouched.end(), m.first) != untouched.end()) m.first->ledger->retract(m.second);
    return s;
  });
}

Status groupSimulateEnd(ncclSimInfo_t* simInfo) {
  bool outermost = false;
  GroupState group;
  Status status = closeLevel("ncclGroupSimulateEnd", &outermost, &group);
  if (!outermost) return status;
  return finishGroup("ncclGroupSimulateEnd", "nothing was estimated", group, [simInfo](GroupState& g) -> Status {
    // Each communicator runs its tasks one after the other; different communicators (GPUs) run
    // side by side, so the group takes as long as its slowest communicator.
    double slowest = 0;
    Status estimated = ncclSuccess;
    for (ncclComm* comm : g.comms) {
      double us = 0;
      Status s = estimateQueuedMicroseconds(comm, &us);
      if (isError(s) && !isError(estimated)) estimated = s;
      slowest = std::max(slowest, us);
    }
    dropQueued(g.comms, g.marks);  // estimated, never run
    if (isError(estimated)) return estimated;
    if (simInfo != nullptr) simInfo->estimatedTime = (float)slowest;
    return ncclSuccess;
  });
}

void joinGroup(ncclComm* comm) {
  if (tGroup.depth == 0 || std::find(tGroup.comms.begin(), tGroup.comms.end(), comm) != tGroup.comms.end()) return;
  tGroup.comms.push_back(comm);
  if (comm->ledger) tGroup.marks.emplace_back(comm, comm->ledger->mark());
}

Status enqueueTask(ncclComm* comm, const Task& task) {
  const bool implicitGroup = tGroup.depth == 0;
  joinGroup(comm);  // before the call is published
  // Outside a group the call is a group of its own: its mark, reused from call to call.
  static thread_local core::OpLedger::Mark implicitMark;
  if (implicitGroup && comm->ledger) comm->ledger->mark(&implicitMark);
  if (!task.isP2p()) {
    WEFT_TRY(core::noteCollectiveCall(comm, callOf(task)));
  } else {
    core::P2pSignature op;
    op.count = task.count;
    op.dataType = (uint8_t)task.dataType;
    WEFT_TRY(core::noteP2pCall(
        comm, task.peer, task.kind == TaskKind::kSend ? core::P2pDirection::kSend : core::P2pDirection::kRecv, op));
  }
  comm->tasks.push_back(task);
  if (!implicitGroup) return ncclSuccess;
  std::vector<ncclComm*> untouched;
  Status s = launchQueued(&comm, 1, &untouched);
  if (isError(s)) {
    comm->tasks.clear();
    if (!untouched.empty() && comm->ledger) comm->ledger->retract(implicitMark);  // the call never ran
  }
  return s;
}

void deferInit(std::function<Status()> job, bool blocking, ncclComm* subject, const ncclComm* channel) {
  tGroup.inits.push_back({std::move(job), blocking, subject, channel});
}

void deferInOrder(std::function<Status()> job, ncclComm* comm) {
  tGroup.inits.push_back({std::move(job), true, comm, comm});
}

void deferFinalize(std::function<Status()> job, bool blocking, ncclComm* subject) {
  tGroup.finalizes.push_back({std::move(job), blocking, subject, nullptr});
}

void deferAbort(ncclComm* comm, std::function<void()> destroy) {
  for (const auto& a : tGroup.aborts)
    if (a.first == comm) return;  // aborted twice in one group: once is enough
  tGroup.aborts.emplace_back(comm, std::move(destroy));
}

void deferDestroy(ncclComm* comm, std::function<void()> destroy) {
  for (const auto& d : tGroup.destroys)
    if (d.first == comm) return;  // destroyed twice in one group: once is enough
  for (const auto& a : tGroup.aborts)
    if (a.first == comm) return;  // the group's abort destroys it
  tGroup.destroys.emplace_back(comm, std::move(destroy));
}

void failGroup(Status error) {
  if (tGroup.depth > 0 && !isError(tGroup.error)) {
    tGroup.error = error;
    tGroup.cause = log::lastErrorOfThread();  // the failed call has just warned
  }
}

}  // namespace weft::enqueue
