#include "core/comm_shrink.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "core/comm_init.h"
#include "core/comm_split.h"
#include "core/communicator.h"
#include "core/log.h"

namespace weft::core {

Status shrinkMembers(int nRanks, int myRank, const int* exclude, int count, std::vector<int>* members) {
  WEFT_CHECK_ARG(count >= 0, "ncclCommShrink: excludeRanksCount is %d; it must not be negative", count);
  WEFT_CHECK_ARG(count == 0 || exclude != nullptr, "ncclCommShrink: excludeRanksList is NULL but excludeRanksCount is %d",
                 count);
  WEFT_CHECK_ARG(count < nRanks, "ncclCommShrink: excludeRanksCount %d leaves none of the %d ranks", count, nRanks);
  std::vector<bool> out(nRanks, false);
  for (int i = 0; i < count; ++i) {
    const int r = exclude[i];
    WEFT_CHECK_ARG(r >= 0 && r < nRanks, "ncclCommShrink: excludeRanksList[%d] is %d, not a rank of this %d-rank "
                   "communicator", i, r, nRanks);
    WEFT_CHECK_ARG(!out[r], "ncclCommShrink: excludeRanksList names rank %d twice", r);
    WEFT_CHECK_ARG(r != myRank, "ncclCommShrink: excludeRanksList[%d] is this rank (%d); excluded ranks must not call "
                   "ncclCommShrink", i, r);
    out[r] = true;
  }
  members->clear();
  for (int r = 0; r < nRanks; ++r) {
    if (!out[r]) members->push_back(r);
  }
  return ncclSuccess;
}

uint64_t membersFingerprint(int nRanks, const std::vector<int>& members) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the parent size and the survivors
  auto mix = [&h](uint32_t v) {
    for (int b = 0; b < 4; ++b, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ULL;
  };
  mix((uint32_t)nRanks);
  for (int r : members) mix((uint32_t)r);
  return h;
}

namespace {

constexpr uint32_t kHelloMagic = 0x53484b48;    // "SHKH"
constexpr uint32_t kVerdictMagic = 0x53484b56;  // "SHKV"
constexpr int kShrinkTag = 0x53480000;         // apart from ncclCommSplit's 0x53000000 + n
constexpr int64_t kVerdictGraceMs = 5000;      // a survivor's wait for the verdict, past its own timeout
constexpr int64_t kLateVerdictMs = 500;        // sending it to a survivor whose hello never came

struct ShrinkHello {
  uint32_t magic;
  int32_t parentRanks;
  int32_t survivors;
  uint32_t nonce;  // this call's, random and nonzero: the verdict answering this hello repeats it
  uint64_t fingerprint;
};

struct ShrinkVerdict {
  uint32_t magic;
  int32_t status;  // ncclSuccess, or what every survivor returns
  int32_t rank;    // the parent rank at fault; -1 for the first survivor itself
  uint32_t nonce;  // of the hello it answers (0: none came)
  uint64_t fingerprint;  // of the first survivor's list
  ncclUniqueId id;  // the child's, when status is ncclSuccess
};

// The bootstrap's waits poll no abort flag while this lives.
class NoAbortFlag {
 public:
  explicit NoAbortFlag(bootstrap::Bootstrap& b) : b_(b), saved_(b.abortFlag()) { b.setAbortFlag(nullptr); }
  ~NoAbortFlag() { b_.setAbortFlag(saved_); }

 private:
  bootstrap::Bootstrap& b_;
  const std::atomic<bool>* saved_;
};

std::string faultText(Status status, int rank) {
  if (rank < 0) return "the first survivor could not create the new communicator's unique id";
  if (status == ncclInvalidUsage) {
    return "parent rank " + std::to_string(rank) + " passed a different excludeRanksList (every survivor must "
           "pass the same ranks)";
  }
  return "parent rank " + std::to_string(rank) + " could not be reached (it exited, hangs, or never called "
         "ncclCommShrink); it is not excluded - add it to excludeRanksList if it is gone";
}

Status firstSurvivor(bootstrap::Bootstrap& b, const std::vector<int>& members, const ShrinkHello& mine,
                     const std::function<Status(ncclUniqueId*)>& makeId, ncclUniqueId* childId) {
  ShrinkVerdict v;
  memset(&v, 0, sizeof(v));
  v.magic = kVerdictMagic;
  v.fingerprint = mine.fingerprint;
  v.status = ncclSuccess;
  v.rank = -1;
  std::vector<bool> unreachable(members.size(), false), gone(members.size(), false);
  std::vector<uint32_t> nonces(members.size(), 0);
  // One deadline for all the hellos: a survivor that never calls costs one timeout, not one per
  // survivor, and the verdict (naming it) reaches the others before their longer wait ends.
  const util::Deadline hellos = b.operationDeadline();
  for (size_t i = 1; i < members.size(); ++i) {
    // A dead survivor is noticed quickly, and one that never calls stalls the others anyway: so
    // reading on past a failure costs little, and leaves no hello behind for a later shrink.
    ShrinkHello h;
    const Status s = b.recvUntil(members[i], kShrinkTag, &h, sizeof(h), hellos);
    unreachable[i] = s == ncclRemoteError || s == ncclSystemError;
    gone[i] = s == ncclRemoteError;  // its connection closed: no verdict can reach it
    if (!isError(s)) nonces[i] = h.nonce;
    const bool same = !isError(s) && h.magic == kHelloMagic && h.fingerprint == mine.fingerprint &&
                      h.survivors == mine.survivors && h.parentRanks == mine.parentRanks;
    if (!same && v.status == ncclSuccess) {
      v.status = unreachable[i] ? s : ncclInvalidUsage;
      v.rank = members[i];
    }
  }
  if (v.status == ncclSuccess) {
    Status s = makeId(&v.id);
    if (isError(s)) v.status = s;
  }
  // The verdict: first to those that answered; then, briefly each, to those that did not (they may
  // be slow rather than gone; one on a dead host must not hold this rank up).
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 1; i < members.size(); ++i) {
      if (gone[i] || unreachable[i] != (pass == 1)) continue;
      v.nonce = nonces[i];
      const util::Deadline d = pass == 0 ? b.operationDeadline() : util::Deadline::afterMs(kLateVerdictMs);
      (void)b.sendUntil(members[i], kShrinkTag, &v, sizeof(v), d);  // a failure here is theirs to report
    }
  }
  if (v.status != ncclSuccess) {
    WEFT_WARN("ncclCommShrink (parent rank %d, first survivor): %s", b.rank(), faultText((Status)v.status, v.rank).c_str());
    return (Status)v.status;
  }
  *childId = v.id;
  return ncclSuccess;
}

Status otherSurvivor(bootstrap::Bootstrap& b, const std::vector<int>& members, const ShrinkHello& mine,
                     ncclUniqueId* childId) {
  const int first = members[0];
  WEFT_TRY(b.send(first, kShrinkTag, &mine, sizeof(mine)));
  ShrinkVerdict v;
  // Longer than the first survivor's wait for the hellos: if another survivor stalls, its verdict
  // names that one, rather than this rank timing out on the first survivor. A verdict of an
  // earlier call of other survivors (this rank gave up before it came) answers another hello of
  // this rank and names another list: passed over. (Answering an older hello with this list, it
  // is the first survivor's answer to this call, which read that hello first: taken.)
  const util::Deadline verdict = b.operationDeadline().extendedByMs(kVerdictGraceMs);
  do {
    WEFT_TRY(b.recvUntil(first, kShrinkTag, &v, sizeof(v), verdict));
  } while (v.magic == kVerdictMagic && v.nonce != 0 && v.nonce != mine.nonce && v.fingerprint != mine.fingerprint);
  const bool known = v.status == ncclSuccess || v.status == ncclInvalidUsage || v.status == ncclRemoteError ||
                     v.status == ncclSystemError || v.status == ncclInternalError || v.status == ncclInvalidArgument;
  if (v.magic != kVerdictMagic || !known || v.rank < -1 || v.rank >= b.nRanks()) {
    WEFT_WARN("ncclCommShrink (parent rank %d): parent rank %d (the first survivor) answered with an invalid message "
              "(magic 0x%x, status %d, rank %d); is it running the same weft build?", b.rank(), first, v.magic,
              v.status, v.rank);
    return ncclSystemError;
  }
  if (v.status != ncclSuccess) {
    WEFT_WARN("ncclCommShrink (parent rank %d): parent rank %d (the first survivor) refused the shrink: %s", b.rank(),
              first, faultText((Status)v.status, v.rank).c_str());
    return (Status)v.status;
  }
  *childId = v.id;
  return ncclSuccess;
}

}  // namespace

Status agreeOnShrink(bootstrap::Bootstrap& parent, const std::vector<int>& members,
                     const std::function<Status(ncclUniqueId*)>& makeId, ncclUniqueId* childId) {
  if (std::find(members.begin(), members.end(), parent.rank()) == members.end()) {
    WEFT_WARN("ncclCommShrink: parent rank %d is not among the survivors", parent.rank());
    return ncclInternalError;
  }
  NoAbortFlag noAbort(parent);
  parent.forgetFailureNotices();
  ShrinkHello mine;
  memset(&mine, 0, sizeof(mine));
  mine.magic = kHelloMagic;
  mine.parentRanks = parent.nRanks();
  mine.survivors = (int32_t)members.size();
  mine.fingerprint = membersFingerprint(parent.nRanks(), members);
  while (mine.nonce == 0) mine.nonce = (uint32_t)std::random_device{}();
  if (members[0] == parent.rank()) return firstSurvivor(parent, members, mine, makeId, childId);
  return otherSurvivor(parent, members, mine, childId);
}

Status shrinkCommunicator(ncclComm* parent, const int* exclude, int count, ncclComm** newcomm,
                          const ncclConfig_t* config, int flags) {
  WEFT_CHECK_ARG(newcomm != nullptr, "ncclCommShrink: argument 'newcomm' is NULL");
  *newcomm = nullptr;
  WEFT_CHECK_ARG(flags == NCCL_SHRINK_DEFAULT || flags == NCCL_SHRINK_ABORT,
                 "ncclCommShrink: shrinkFlags is %d; use NCCL_SHRINK_DEFAULT (0) or NCCL_SHRINK_ABORT (1)", flags);
  std::vector<int> members;
  WEFT_TRY(shrinkMembers(parent->nRanks, parent->rank, exclude, count, &members));
  CommConfig cfg;
  WEFT_TRY(parseChildConfig(config, parent->config, "ncclCommShrink", &cfg));
  if (!parent->revoked.load()) {
    if (flags == NCCL_SHRINK_ABORT) {
      WEFT_TRY(revokeCommunicator(parent));
    } else if (isError(parent->asyncError.load())) {
      WEFT_WARN("ncclCommShrink: the communicator (rank %d of %d) has failed (%s); pass NCCL_SHRINK_ABORT to stop its "
                "work first, or call ncclCommRevoke before shrinking", parent->rank, parent->nRanks,
                ncclGetErrorString(parent->asyncError.load()));
      return ncclInvalidUsage;
    }
  }
  ncclComm* child = newChild(parent, cfg);
  auto steps = [parent, members, child]() -> Status {
    ncclUniqueId id;
    int newRank = 0, cudaDev = -1;
    {
      bootstrap::Bootstrap::Use use(*parent->bootstrap);  // the parent's destruction waits for this block
      const bootstrap::SocketAddress near = parent->bootstrap->listenAddress();
      WEFT_TRY(agreeOnShrink(*parent->bootstrap, members,
                             [&near](ncclUniqueId* out) { return bootstrap::createRootId(out, &near); }, &id));
      newRank = (int)(std::find(members.begin(), members.end(), parent->rank) - members.begin());
      WEFT_INFO(log::kInit, "ncclCommShrink: parent rank %d of %d becomes rank %d of %zu", parent->rank,
                parent->nRanks, newRank, members.size());
      cudaDev = parent->cudaDev;
    }
    return initCommunicator(child, {id}, (int)members.size(), newRank, cudaDev);
  };
  return createChild(parent, child, steps, newcomm);
}

}  // namespace weft::core
