// Watches the peers of live communicators: when a rank's process on this host exits, every
// communicator that talks to it fails with an error naming that rank, and its kernels are told to
// stop, so that nothing waits forever on a dead peer. One thread per process, started by the
// first communicator with peers in other processes.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

struct ncclComm;

namespace weft::core {

void watchCommunicator(ncclComm* comm);
void unwatchCommunicator(ncclComm* comm);

// Pure: given which peer processes are alive, the first dead peer rank (or -1). `pids[r]` is 0 for
// ranks not watched (this process, or other hosts).
int firstDeadPeer(const std::vector<pid_t>& pids, const std::vector<bool>& alive);

}  // namespace weft::core
