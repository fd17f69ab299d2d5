// The communicator's view of the machine: each rank describes its own host and GPU, the
// descriptions are gathered and merged into one topology that every rank computes alike, and the
// channels (ring orders) and the transport of every pair come out of it, checked for agreement.
#pragma once

#include "core/status.h"

struct ncclComm;

namespace weft::core {

// Sets comm->nChannels (bounded by the config and NCCL_MIN/MAX_NCHANNELS), comm->rings,
// comm->trees and comm->tuning (the tuning model's view of the topology).
// Collective over the communicator's bootstrap.
[[nodiscard]] Status buildCommTopology(ncclComm* comm, int minChannels, int maxChannels);

}  // namespace weft::core
