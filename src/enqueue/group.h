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

// Queues a task on the communicator; launches at once when no group is open.
[[nodiscard]] Status enqueueTask(ncclComm* comm, const Task& task);
// Makes the communicator a member of the open group (enqueueTask does it too): it remembers where
// the communicator's published calls stand, to take back those of a group that fails. For calls
// published before their tasks are queued (ncclAlltoAll, ncclGather, ncclScatter).
void joinGroup(ncclComm* comm);

// A communicator creation to run at the outermost groupEnd. `blocking` false: groupEnd returns
// ncclInProgress at once and the job reports through the communicator's async error.
void deferInit(std::function<Status()> job, bool blocking);
// A blocking job that waits for the peers (a window registration), run with the creations at the
// outermost groupEnd: beside the other jobs, but after the earlier ones of the same `serialKey`
// (its communicator), one at a time in the order they came.
void deferInOrder(std::function<Status()> job, const void* serialKey);

// A ncclCommFinalize to run at the outermost groupEnd, after the group's launches; the group's
// finalizations run concurrently, so one thread can finalize all its communicators in one group.
void deferFinalize(std::function<Status()> job, bool blocking);

// An ncclCommAbort inside a group: the caller has raised the communicator's abort flag; `destroy`
// runs at the outermost groupEnd, once every abort of the group has raised its flag. Destroying
// one communicator frees memory, which waits for every kernel of the device, also those of the
// other communicators being aborted (one process's communicators waiting for each other's peers
// would wait forever). The communicator's queued work of the group is dropped.
void deferAbort(ncclComm* comm, std::function<void()> destroy);

// Records an error raised inside a group: the group's End reports it and launches nothing.
void failGroup(Status error);

}  // namespace weft::enqueue
