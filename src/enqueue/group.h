// Group semantics (ncclGroupStart/End): calls between the outermost Start and End are queued per
// communicator and launched together at End. Outside a group every call is its own implicit group.
// Communicator creation inside a group (one thread driving several GPUs) is deferred to End, where
// the creations run concurrently, since each waits for the others' rendezvous.
#pragma once

#include <functional>

#include "core/status.h"
#include "enqueue/task.h"

struct ncclComm;

namespace weft::enqueue {

[[nodiscard]] Status groupStart();
[[nodiscard]] Status groupEnd();
// Like groupEnd, but launches nothing: drops the queued work and reports the model's estimate.
[[nodiscard]] Status groupSimulateEnd(ncclSimInfo_t* simInfo);
bool inGroup();
int groupDepth();  // open ncclGroupStart levels of this thread

// Queues a task on the communicator; launches at once when no group is open.
[[nodiscard]] Status enqueueTask(ncclComm* comm, const Task& task);
// Makes the communicator a member of the open group (enqueueTask does it too): it remembers where
// the communicator's published calls stand, to take back those of a group that fails. For calls
// published before their tasks are queued (ncclAlltoAll, ncclGather, ncclScatter).
void joinGroup(ncclComm* comm);

// Jobs deferred to the outermost groupEnd name the communicators they touch. `subject` is the one
// the job creates, finalizes or works on: when the job never runs (its group failed, or a
// communicator it needs was aborted in the group) a subject still waiting (ncclInProgress) gets
// the error instead, so nobody polls ncclCommGetAsyncError forever. `channel` is the communicator
// whose bootstrap the job talks over: jobs of one channel run one after the other, in call order
// (they would otherwise read each other's messages), beside the other jobs.

// A communicator creation (or split, over the parent's bootstrap). `blocking` false: groupEnd
// returns ncclInProgress at once and the job reports through the communicator's async error.
void deferInit(std::function<Status()> job, bool blocking, ncclComm* subject, const ncclComm* channel = nullptr);
// A blocking job that waits for the peers (a window registration) over `comm`'s bootstrap.
void deferInOrder(std::function<Status()> job, ncclComm* comm);

// A ncclCommFinalize to run at the outermost groupEnd, after the group's launches; the group's
// finalizations run concurrently, so one thread can finalize all its communicators in one group.
void deferFinalize(std::function<Status()> job, bool blocking, ncclComm* subject);

// An ncclCommAbort inside a group: the caller has raised the communicator's abort flag; `destroy`
// runs at the outermost groupEnd, once every abort of the group has raised its flag. Destroying
// one communicator frees memory, which waits for every kernel of the device, also those of the
// other communicators being aborted (one process's communicators waiting for each other's peers
// would wait forever). The communicator's queued work and deferred jobs of the group are dropped,
// and so are the jobs that talk over its bootstrap (splits of it).
void deferAbort(ncclComm* comm, std::function<void()> destroy);

// An ncclCommDestroy inside a group (as NCCL, which reclaims at the group's end): `destroy` runs
// last at the outermost groupEnd, after the group's launches and finalizations, also when the
// group fails on a job or its launch. A group that fails on a call before its end runs none of its
// jobs, also not its destroys and aborts (as NCCL): those handles stay valid, to be destroyed again.
void deferDestroy(ncclComm* comm, std::function<void()> destroy);

// Records an error raised inside a group: the group's End reports it and launches nothing.
void failGroup(Status error);

}  // namespace weft::enqueue
