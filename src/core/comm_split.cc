#include "core/comm_split.h"

#include <algorithm>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "core/comm_init.h"
#include "core/communicator.h"
#include "core/log.h"
#include "enqueue/group.h"
#include "runtime/gpu.h"

namespace weft::core {

std::vector<int> splitMembers(const std::vector<SplitEntry>& all, int color) {
  std::vector<SplitEntry> members;
  for (const SplitEntry& e : all) {
    if (e.color == color) members.push_back(e);
  }
  std::stable_sort(members.begin(), members.end(), [](const SplitEntry& a, const SplitEntry& b) {
    return a.key != b.key ? a.key < b.key : a.parentRank < b.parentRank;
  });
  std::vector<int> ranks;
  for (const SplitEntry& e : members) ranks.push_back(e.parentRank);
  return ranks;
}

namespace {

// The part that talks to the parent's other ranks; runs at once or at the group's end.
Status splitSteps(ncclComm* parent, int color, int key, ncclComm* child, int tag) {
  std::vector<SplitEntry> all(parent->nRanks);
  all[parent->rank] = {color, key, parent->rank};
  WEFT_TRY(parent->bootstrap->allGather(all.data(), sizeof(SplitEntry)));
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::vector<int> members = splitMembers(all, color);
  int newRank = (int)(std::find(members.begin(), members.end(), parent->rank) - members.begin());
  ncclUniqueId id;
  if (newRank == 0) {
    WEFT_TRY(bootstrap::createRootId(&id, &parent->bootstrap->listenAddress()));
    for (size_t i = 1; i < members.size(); ++i) WEFT_TRY(parent->bootstrap->send(members[i], tag, &id, sizeof(id)));
  } else {
    WEFT_TRY(parent->bootstrap->recv(members[0], tag, &id, sizeof(id)));
  }
  return initCommunicator(child, {id}, (int)members.size(), newRank, parent->cudaDev);
}

}  // namespace

ncclComm* newChild(const ncclComm* parent, const CommConfig& cfg) {
  auto* child = new ncclComm();
  child->config = cfg;
  child->cudaDev = parent->cudaDev;
  child->asyncError.store(ncclInProgress);
  return child;
}

Status createChild(ncclComm* parent, ncclComm* child, std::function<Status()> steps, ncclComm** newcomm) {
  auto job = [parent, child, steps]() -> Status {
    runtime::ScopedDevice device;
    WEFT_TRY(device.set(parent->cudaDev));
    Status s = steps();
    if (child && isError(s)) {
      if (child->asyncError.load() == ncclInProgress) child->setLastError(log::lastErrorOfThread());
      child->asyncError.store(s);
    }
    return s;
  };
  if (enqueue::inGroup()) {
    enqueue::deferInit(job, true);
    *newcomm = child;
    return ncclSuccess;
  }
  Status s = job();
  if (isError(s)) {
    if (child) {
      freeCommunicator(child);
      delete child;
    }
    return s;
  }
  *newcomm = child;
  return ncclSuccess;
}

Status splitCommunicator(ncclComm* parent, int color, int key, ncclComm** newcomm, const ncclConfig_t* config) {
  WEFT_CHECK_ARG(newcomm != nullptr, "ncclCommSplit: argument 'newcomm' is NULL");
  *newcomm = nullptr;
  WEFT_CHECK_ARG(color >= 0 || color == NCCL_SPLIT_NOCOLOR,
                 "ncclCommSplit: color %d is negative; use a non-negative color or NCCL_SPLIT_NOCOLOR", color);
  CommConfig cfg;
  WEFT_TRY(parseChildConfig(config, parent->config, "ncclCommSplit", &cfg));
  int tag = 0x53000000 + parent->splitCount++;
  ncclComm* child = color == NCCL_SPLIT_NOCOLOR ? nullptr : newChild(parent, cfg);
  return createChild(parent, child, [=] { return splitSteps(parent, color, key, child, tag); }, newcomm);
}

}  // namespace weft::core
