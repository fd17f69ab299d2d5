// Creating and tearing down communicators (the work behind ncclCommInitRank*, ncclCommSplit,
// ncclCommFinalize/Destroy/Abort).
#pragma once

#include <vector>

#include "core/status.h"
#include "nccl.h"

struct ncclComm;

namespace weft::core {

// Runs the whole creation on the calling thread: rendezvous, peer table, channels, connections,
// device state. `comm` was allocated by the caller (so a non-blocking creation can hand out the
// handle early); on failure it is left with asyncError set and must be destroyed. Several ids
// (ncclCommInitRankScalable) spread the rendezvous over several roots.
[[nodiscard]] Status initCommunicator(ncclComm* comm, const std::vector<ncclUniqueId>& ids, int nRanks, int rank,
                                      int cudaDev);

// Waits for the communicator's outstanding work (ncclCommFinalize), within the host deadline.
[[nodiscard]] Status finalizeCommunicator(ncclComm* comm);

// Stops kernels and host waits; used by ncclCommAbort before freeing.
void requestAbort(ncclComm* comm);

// ncclCommRevoke: stops the communicator's work for good (kernels see the abort flag, which stays
// raised) and waits up to NCCL_TIMEOUT for it to end; the communicator then stays a parent for
// ncclCommSplit / ncclCommShrink (its bootstrap no longer polls the abort flag) and reports
// ncclSuccess. The watchdog stops watching it.
[[nodiscard]] Status revokeCommunicator(ncclComm* comm);

// Frees everything the communicator holds. After abort it does not wait for the GPU work to end
// gracefully (kernels saw the abort flag).
void freeCommunicator(ncclComm* comm);

}  // namespace weft::core
