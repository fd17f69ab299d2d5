// ncclCommSplit: ranks of a parent that pass the same color form a child, ordered by key.
#pragma once

#include <vector>

#include "core/status.h"
#include "nccl.h"

struct ncclComm;

namespace weft::core {

struct SplitEntry {
  int color;
  int key;
  int parentRank;
};

// Pure: the members of `color` ordered by (key, parent rank), as parent ranks.
std::vector<int> splitMembers(const std::vector<SplitEntry>& all, int color);

// Collective over the parent. *newcomm is NULL for NCCL_SPLIT_NOCOLOR.
[[nodiscard]] Status splitCommunicator(ncclComm* parent, int color, int key, ncclComm** newcomm,
                                       const ncclConfig_t* config);

}  // namespace weft::core
