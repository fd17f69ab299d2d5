// From a communicator's queued tasks to kernels on the user's streams: plan, fill the work FIFO,
// launch. The only enqueue code that touches streams and kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

struct ncclComm;

namespace weft::enqueue {

// Plans and launches everything queued on the `count` communicators (a group), then clears the
// queues. Returns the first error; communicators without one still launch. `untouched` (if given)
// gets the communicators whose work failed before any of it reached a stream.
[[nodiscard]] Status launchQueued(ncclComm* const* comms, size_t count, std::vector<ncclComm*>* untouched = nullptr);

// Makes the communicator's pool for the work items of captured launches, with a first buffer so
// that a capture normally allocates nothing.
[[nodiscard]] Status makeGraphWorkPool(ncclComm* comm);

// NCCL_WEFT_HOST_PROFILE=1: logs the communicator's host time per enqueue call and phase (an INFO
// line: NCCL_DEBUG=INFO shows it). Nothing otherwise.
void reportHostProfile(const ncclComm* comm);

// The tuning model's estimate for the queued tasks, in microseconds (ncclGroupSimulateEnd): the
// sum of the collectives' estimates (planner.h estimateTasks). Leaves the queue alone.
[[nodiscard]] Status estimateQueuedMicroseconds(ncclComm* comm, double* us);

}  // namespace weft::enqueue
