// From a communicator's queued tasks to kernels on the user's streams: plan, fill the work FIFO,
// launch. The only enqueue code that touches streams and kernels.
#pragma once

#include "core/status.h"

struct ncclComm;

namespace weft::enqueue {

// Plans and launches everything queued on the communicator, then clears the queue.
[[nodiscard]] Status launchQueued(ncclComm* comm);

// The tuning model's estimate for the queued tasks, in microseconds (ncclGroupSimulateEnd): the
// sum of the collectives' estimates (planner.h estimateTasks). Leaves the queue alone.
[[nodiscard]] Status estimateQueuedMicroseconds(ncclComm* comm, double* us);

}  // namespace weft::enqueue
