#include "core/comm_split.h"

#include <algorithm>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
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

Status agreeOnSplit(bootstrap::Bootstrap& parent, int color, int key, int tag,
                    const std::function<Status(ncclUniqueId*)>& makeId, int* childRank, int* childRanks,
                    ncclUniqueId* childId) {
  *childRank = *childRanks = 0;
  std::vector<SplitEntry> all(parent.nRanks());
  all[parent.rank()] = {color, key, parent.rank()};
  WEFT_TRY(parent.allGather(all.data(), sizeof(SplitEntry)));
  for (int r = 0; r < parent.nRanks(); ++r) {
    if (all[r].parentRank != r) {
      WEFT_WARN("ncclCommSplit (parent rank %d): the entry received for parent rank %d is corrupt (it names rank %d); "
                "are all ranks running the same weft build?", parent.rank(), r, all[r].parentRank);
      return ncclInternalError;
    }
  }
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  const std::vector<int> members = splitMembers(all, color);
  *childRanks = (int)members.size();
  *childRank = (int)(std::find(members.begin(), members.end(), parent.rank()) - members.begin());
  if (*childRank != 0) return parent.recv(members[0], tag, childId, sizeof(*childId));
  WEFT_TRY(makeId(childId));
  Status first = ncclSuccess;
  for (size_t i = 1; i < members.size(); ++i) {
    const Status s = parent.send(members[i], tag, childId, sizeof(*childId));
    if (isError(s) && !isError(first)) {
      // The new root ends now rather than never. The other members still get the id: at the
      // root they learn at once that the creation was given up, rather than at their deadline.
      first = s;
      bootstrap::UniqueIdInfo info;
      std::string why;
      if (bootstrap::decodeUniqueId(*childId, &info, &why)) {
        bootstrap::Root::abandonDetached(info.jobKey, 0, "ncclCommSplit could not pass the new communicator's id "
                                         "to parent rank " + std::to_string(members[i]));
      }
    }
  }
  return first;
}

namespace {

// The whole split on one rank; runs at once or at the group's end.
Status splitSteps(ncclComm* parent, int color, int key, ncclComm* child, int tag) {
  int childRank = 0, childRanks = 0, cudaDev = -1;
  ncclUniqueId id;
  {
    bootstrap::Bootstrap::Use use(*parent->bootstrap);  // the parent's destruction waits for this block
    const bootstrap::SocketAddress near = parent->bootstrap->listenAddress();
    auto makeId = [&near](ncclUniqueId* out) { return bootstrap::createRootId(out, &near); };
    cudaDev = parent->cudaDev;
    WEFT_TRY(agreeOnSplit(*parent->bootstrap, color, key, tag, makeId, &childRank, &childRanks, &id));
  }
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  return initCommunicator(child, {id}, childRanks, childRank, cudaDev);
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
    enqueue::deferInit(job, true, child, parent);  // over the parent's bootstrap: in call order
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
