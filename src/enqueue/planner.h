// The planner: a pure function from a group's tasks on one communicator to kernel launches, each a
// list of work items per channel. No GPU, no communicator object: everything it needs is in
// PlanShape, so it is unit-tested on the CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "device/abi.h"
#include "enqueue/task.h"

namespace weft::enqueue {

// What the planner knows about the communicator.
struct PlanShape {
  int rank = 0;
  int nRanks = 1;
  int nChannels = 1;               // channels with ring connections
  int stepBytes = 1 << 19;         // Simple step size of every connection
  size_t minChannelBytes = 1 << 17;  // a collective uses about bytes/minChannelBytes channels
  // sendChannels[p]: the channels on which this rank has a connection to peer p, in increasing
  // order; recvChannels[p]: those on which it has one from p. Must be the sets the peer computes
  // for the other direction (the connection plan guarantees it).
  std::vector<std::vector<int>> sendChannels;
  std::vector<std::vector<int>> recvChannels;
  // Blocks beyond the channels that only run local copies (send/receive to self): channel ids
  // nChannels .. nChannels + copyLanes - 1, which have no connections. The copies then run beside
  // the transfers to peers instead of before them (AlltoAll's own block). 0: copies use the channels.
  int copyLanes = 0;
};

// One kernel launch: block b serves channel `channels[b]` and runs works[b] in order.
struct PlannedLaunch {
  std::vector<int> channels;
  std::vector<std::vector<dev::DevWork>> works;
  size_t workCount() const;
};

// Turns tasks into launches. Collectives keep their call order and come first; point-to-point
// tasks follow in rounds (round d: send to rank+d, receive from rank-d), the order every rank
// computes alike, so that matching sends and receives meet without deadlock.
[[nodiscard]] Status planTasks(const std::vector<Task>& tasks, const PlanShape& shape,
                               std::vector<PlannedLaunch>* launches);

// How many channels a collective of `bytes` uses (at least 1, at most shape.nChannels).
int collectiveChannels(size_t bytes, const PlanShape& shape);

// Copy lanes for a communicator with nChannels channels: half as many, within kMaxChannels.
int defaultCopyLanes(int nChannels);

// Splits `count` elements into `parts` contiguous ranges whose boundaries fall on multiples of
// `alignElems` (the last part takes the remainder). Empty parts are possible when count is small.
void splitRange(uint64_t count, int parts, uint64_t alignElems, int index, uint64_t* offset,
                uint64_t* length);

}  // namespace weft::enqueue
