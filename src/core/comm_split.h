// ncclCommSplit: ranks of a parent that pass the same color form a child, ordered by key.
#pragma once

#include <functional>
#include <vector>

#include "core/config.h"
#include "core/status.h"
#include "nccl.h"

struct ncclComm;

namespace weft::bootstrap {
class Bootstrap;
}

namespace weft::core {

struct SplitEntry {
  int color;
  int key;
  int parentRank;
};

// Pure: the members of `color` ordered by (key, parent rank), as parent ranks.
std::vector<int> splitMembers(const std::vector<SplitEntry>& all, int color);

// The part of a split that talks to the parent's ranks: every rank's color and key, then the
// child's unique id from its rank 0 (which starts the child's root) to the other members. Sets
// *childRank and *childRanks (0 and 0 for NCCL_SPLIT_NOCOLOR: no child, no id). If rank 0 cannot
// hand the id on, the child's root ends at once (telling the members that got it) and the call fails.
// `makeId` makes the id and its root (bootstrap::createRootId near the parent's address).
[[nodiscard]] Status agreeOnSplit(bootstrap::Bootstrap& parent, int color, int key, int tag,
                                  const std::function<Status(ncclUniqueId*)>& makeId, int* childRank, int* childRanks,
                                  ncclUniqueId* childId);

// Collective over the parent. *newcomm is NULL for NCCL_SPLIT_NOCOLOR.
[[nodiscard]] Status splitCommunicator(ncclComm* parent, int color, int key, ncclComm** newcomm,
                                       const ncclConfig_t* config);

// A child of `parent` with config `cfg`, on the parent's device, still being created.
ncclComm* newChild(const ncclComm* parent, const CommConfig& cfg);

// Runs `steps` (talk to the parent's ranks, then create `child`) on the parent's device: now, or
// at the group's end inside a group (*newcomm is then set at once and completes there). On
// failure now, the child is freed and *newcomm stays NULL. `child` may be null (no child here).
[[nodiscard]] Status createChild(ncclComm* parent, ncclComm* child, std::function<Status()> steps,
                                 ncclComm** newcomm);

}  // namespace weft::core
