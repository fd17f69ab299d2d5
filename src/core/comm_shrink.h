// ncclCommShrink: the ranks of a parent that are not excluded form a child, numbered densely in
// parent-rank order. The excluded ranks take no part (they may have died): the survivors agree
// over the parent's bootstrap alone, which still works when the parent has failed or was revoked.
//
// The agreement, one round per call: the first survivor (the child's rank 0) asks every other
// survivor for a fingerprint of its exclude list, checks that all are equal, creates the child's
// unique id and hands it out, or tells every survivor which parent rank disagreed or could not be
// reached. Rounds are numbered, so messages of an earlier call that ended early are passed over.
// Then the survivors create the child as ncclCommInitRank does. A survivor that never calls
// leaves the others waiting until NCCL_BOOTSTRAP_TIMEOUT, as any communicator creation.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "nccl.h"

struct ncclComm;
namespace weft::bootstrap { class Bootstrap; }

namespace weft::core {

// Pure: checks the exclude list of a parent of nRanks as seen by `myRank` and gives the survivors
// as parent ranks, ascending. Errors (ncclInvalidArgument) name the argument and the entry.
[[nodiscard]] Status shrinkMembers(int nRanks, int myRank, const int* exclude, int count, std::vector<int>* members);

// Pure: the same on every rank given the same survivors of the same parent size.
uint64_t membersFingerprint(int nRanks, const std::vector<int>& members);

// The agreement above, over `parent` (this rank must be one of `members`). `makeId` creates the
// child's id on the first survivor. The waits ignore the bootstrap's abort flag and the failure
// notices that arrived before (the parent may have failed: that is when one shrinks); they end at
// NCCL_BOOTSTRAP_TIMEOUT or when a survivor is found dead.
[[nodiscard]] Status agreeOnShrink(bootstrap::Bootstrap& parent, const std::vector<int>& members,
                                   const std::function<Status(ncclUniqueId*)>& makeId, ncclUniqueId* childId);

// ncclCommShrink on a parent that passed checkCommParent. NCCL_SHRINK_ABORT revokes the parent
// first (its kernels stop); without it, a parent that has failed is refused with a hint.
[[nodiscard]] Status shrinkCommunicator(ncclComm* parent, const int* exclude, int count, ncclComm** newcomm,
                                        const ncclConfig_t* config, int flags);

}  // namespace weft::core
