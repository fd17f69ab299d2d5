// What the tuning model (graph/tuning.h) needs to know about a communicator, taken from its
// topology and channel plan, and NCCL_NTHREADS validated as NCCL validates it. Pure.
#pragma once

#include <cstdint>
#include <string>

#include "graph/channels.h"
#include "graph/topology.h"
#include "graph/tuning.h"

namespace weft::graph {

// The model's view of a communicator whose channels come from `plan` (nChannels of them after
// NCCL_MIN/MAX_NCHANNELS). Hops inside a host are NVLink when the rings' farthest GPU-to-GPU path
// is NVLink (direct, through NVSwitch or through one GPU), PCIe otherwise. `supported` and `env`
// are left at "everything": the planner and the communicator fill them.
TuningInput tuningInputFor(const Topology& topo, const ChannelPlan& plan, int nChannels);

// When the topology could not be merged or searched: a conservative view (PCIe hops at 12 GB/s
// per channel, so no LL128) that still lets every rank pick the same thing.
TuningInput fallbackTuningInput(int nRanks, int nChannels);

// NCCL_NTHREADS (value <= 0: unset, returns def). NCCL's rules: a multiple of the warp size
// between 64 and maxThreads; a value that is not a multiple becomes maxThreads, one out of range
// is clamped. *note says what was done with a set value ("" when unset).
int nthreadsSetting(int64_t value, int warpSize, int maxThreads, int def, std::string* note);

}  // namespace weft::graph
