// The communicator's view of the machine: each rank describes its own host and GPU, the
// descriptions are gathered and merged into one topology that every rank computes alike, and the
// channels (ring orders) and the transport of every pair come out of it, checked for agreement.
#pragma once

#include <string>

#include "core/status.h"

struct ncclComm;

namespace weft::core {

// Sets comm->nChannels (bounded by the config and NCCL_MIN/MAX_NCHANNELS), comm->rings,
// comm->trees and comm->tuning (the tuning model's view of the topology).
// Collective over the communicator's bootstrap. userMinChannels is the user's own floor (config,
// NCCL_MIN_NCHANNELS) within minChannels: weft's part above it drops for host-memory hops.
[[nodiscard]] Status buildCommTopology(ncclComm* comm, int minChannels, int maxChannels, int userMinChannels);

// The channels to build at least: minChannels, except that weft's own part of it (above userMin,
// the user's floor) drops to shmMinChannels when any pair of the communicator goes through host
// memory (anyShm, from every rank's transport row, so all ranks agree).
int channelFloor(int minChannels, int userMin, bool anyShm, int shmMinChannels);

// Whether ranks on other hosts can be reached, and how (comm->netPlugin, by the communicator's
// NCCL_NET / ncclConfig_t.netName: transport/net/net_plugin.h netChoice). Otherwise false with *why
// saying what to change.
bool chooseNetwork(ncclComm* comm, std::string* why);

}  // namespace weft::core
