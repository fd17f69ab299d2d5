#include "enqueue/group.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "core/communicator.h"
#include "enqueue/launch.h"

namespace weft::enqueue {
namespace {

struct InitJob {
  std::function<Status()> run;
  bool blocking;
};

struct GroupState {
  int depth = 0;
  Status error = ncclSuccess;
  std::vector<ncclComm*> comms;  // communicators with queued tasks, in first-use order
  std::vector<InitJob> inits;
  std::vector<InitJob> finalizes;
};

thread_local GroupState tGroup;

// Runs deferred communicator jobs (creations, finalizations) concurrently, since each waits for
// its peers, and joins them. A non-blocking job only starts its own thread and answers ncclInProgress.
Status runJobs(std::vector<InitJob> jobs) {
  if (jobs.empty()) return ncclSuccess;
  std::vector<Status> results(jobs.size(), ncclSuccess);
  if (jobs.size() == 1) {
    results[0] = jobs[0].run();
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < jobs.size(); ++i) threads.emplace_back([&results, &jobs, i] { results[i] = jobs[i].run(); });
    for (auto& t : threads) t.join();
  }
  bool pending = false;
  for (Status s : results) {
    if (isError(s)) return s;
    pending = pending || s == ncclInProgress;
  }
  return pending ? ncclInProgress : ncclSuccess;
}

void dropQueued(const std::vector<ncclComm*>& comms) {
  for (ncclComm* comm : comms) comm->tasks.clear();
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

Status groupStart() {
  tGroup.depth++;
  return ncclSuccess;
}

Status groupEnd() {
  if (tGroup.depth == 0) {
    WEFT_WARN("ncclGroupEnd: not inside a group (ncclGroupStart was not called, or ncclGroupEnd was called once too often)");
    return ncclInvalidUsage;
  }
  if (--tGroup.depth > 0) return ncclSuccess;
  GroupState group = std::move(tGroup);
  tGroup = GroupState();
  if (isError(group.error)) {
    dropQueued(group.comms);
    WEFT_WARN("ncclGroupEnd: an earlier call in this group failed (%s); nothing in the group was launched",
              ncclGetErrorString(group.error));
    return group.error;
  }
  Status initStatus = runJobs(std::move(group.inits));
  if (isError(initStatus)) {
    dropQueued(group.comms);
    return initStatus;
  }
  WEFT_TRY(launchQueued(group.comms));
  Status finalizeStatus = runJobs(std::move(group.finalizes));
  if (isError(finalizeStatus)) return finalizeStatus;
  return initStatus == ncclInProgress ? initStatus : finalizeStatus;
}

Status groupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (tGroup.depth == 0) {
    WEFT_WARN("ncclGroupSimulateEnd: not inside a group");
    return ncclInvalidUsage;
  }
  if (--tGroup.depth > 0) return ncclSuccess;
  GroupState group = std::move(tGroup);
  tGroup = GroupState();
  float estimate = 0.0f;
  for (ncclComm* comm : group.comms) estimate += estimateQueuedMicroseconds(comm);
  dropQueued(group.comms);
  simInfo->estimatedTime = estimate;
  return group.error;
}

Status enqueueTask(ncclComm* comm, const Task& task) {
  if (tGroup.depth == 0) {
    comm->tasks.push_back(task);
    Status s = launchQueued({comm});
    if (isError(s)) comm->tasks.clear();
    return s;
  }
  if (std::find(tGroup.comms.begin(), tGroup.comms.end(), comm) == tGroup.comms.end()) {
    tGroup.comms.push_back(comm);
  }
  comm->tasks.push_back(task);
  return ncclSuccess;
}

void deferInit(std::function<Status()> job, bool blocking) {
  tGroup.inits.push_back({std::move(job), blocking});
}

void deferFinalize(std::function<Status()> job, bool blocking) {
  tGroup.finalizes.push_back({std::move(job), blocking});
}

void failGroup(Status error) {
  if (tGroup.depth > 0 && !isError(tGroup.error)) tGroup.error = error;
}

}  // namespace weft::enqueue
