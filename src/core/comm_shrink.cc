#include "core/comm_shrink.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

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

constexpr uint32_t kAskMagic = 0x53484b41;      // "SHKA": the first survivor opens a round
constexpr uint32_t kHelloMagic = 0x53484b48;    // "SHKH": a survivor's answer, with its list's fingerprint
constexpr uint32_t kVerdictMagic = 0x53484b56;  // "SHKV": the round's outcome
constexpr int kShrinkTag = 0x53480000;         // apart from ncclCommSplit's 0x53000000 + n
constexpr int64_t kVerdictGraceMs = 5000;      // a survivor's wait for the verdict, past its own timeout
constexpr int64_t kLateVerdictMs = 500;        // sending it to a survivor whose hello never came
constexpr int64_t kAskMs = 5000;               // at most, per survivor: one on a dead host holds up no other

// One shape for the three messages of a round (a receive names its size). A call is one round,
// numbered by the first survivor at random: a hello answers one round and a verdict ends one, so
// messages left over from an earlier call (a survivor that came late, or gave up early) are told
// apart and passed over instead of being taken as this call's.
struct ShrinkMessage {
  uint32_t magic;
  int32_t parentRanks;
  uint64_t round;  // nonzero
  int32_t survivors;
  int32_t status;        // verdict: ncclSuccess, or what every survivor returns
  uint64_t fingerprint;  // hello: the sender's list; verdict: the first survivor's
  int32_t rank;          // verdict: the parent rank at fault; -1 for the first survivor itself
  uint32_t reserved;
  ncclUniqueId id;       // verdict: the child's, when status is ncclSuccess
};
static_assert(sizeof(ShrinkMessage) == 40 + sizeof(ncclUniqueId), "no padding: every byte is set");
static_assert(std::is_trivially_copyable<ShrinkMessage>::value, "sent as bytes");

ShrinkMessage shrinkMessage(uint32_t magic, uint64_t round, const ShrinkMessage& mine) {
  ShrinkMessage m = mine;
  m.magic = magic;
  m.round = round;
  return m;
}

// The bootstrap's waits poll no abort flag while this lives.
class NoAbortFlag {
 public:
  explicit NoAbortFlag(bootstrap::Bootstrap& b) : b_(b), saved_(b.abortFlag()) { b.setAbortFlag(nullptr); }
  ~NoAbortFlag() { b_.setAbortFlag(saved_); }

 private:
  bootstrap::Bootstrap& b_;
  const std::atomic<bool>* saved_;
};

std::string faultText(Status status, int rank, int me) {
  if (rank < 0) return "the first survivor could not create the new communicator's unique id";
  if (status == ncclInvalidUsage) {
    return "parent rank " + std::to_string(rank) + " passed a different excludeRanksList (every survivor must "
           "pass the same ranks)";
  }
  if (rank == me) {
    return "this rank (parent rank " + std::to_string(rank) + ") came after the first survivor had stopped waiting "
           "for it (NCCL_BOOTSTRAP_TIMEOUT); every survivor must call ncclCommShrink again";
  }
  return "parent rank " + std::to_string(rank) + " could not be reached (it exited, hangs, or never called "
         "ncclCommShrink); it is not excluded - add it to excludeRanksList if it is gone";
}

// Reads member's hello of `round`, passing over the hellos of earlier rounds it left unread.
Status readHello(bootstrap::Bootstrap& b, int member, uint64_t round, const util::Deadline& deadline,
                 ShrinkMessage* hello) {
  for (;;) {
    WEFT_TRY(b.recvUntil(member, kShrinkTag, hello, sizeof(*hello), deadline));
    if (hello->magic != kHelloMagic || hello->round == round) return ncclSuccess;
  }
}

Status firstSurvivor(bootstrap::Bootstrap& b, const std::vector<int>& members, const ShrinkMessage& mine,
                     const std::function<Status(ncclUniqueId*)>& makeId, ncclUniqueId* childId) {
  const uint64_t round = bootstrap::randomJobKey();  // random and nonzero
  ShrinkMessage v = shrinkMessage(kVerdictMagic, round, mine);
  v.status = ncclSuccess;
  v.rank = -1;
  std::vector<bool> unreachable(members.size(), false), gone(members.size(), false), asked(members.size(), false);
  // One deadline for the whole round: a survivor that never calls costs one timeout, not one per
  // survivor, and the verdict (naming it) reaches the others before their longer wait ends.
  const util::Deadline hellos = b.operationDeadline();
  auto fault = [&](size_t i, Status s, bool reached) {
    unreachable[i] = !reached;
    gone[i] = s == ncclRemoteError;  // its connection closed: no verdict can reach it
    if (v.status == ncclSuccess) {
      v.status = reached ? ncclInvalidUsage : s == ncclRemoteError ? s : ncclSystemError;
      v.rank = members[i];
    }
  };
  const ShrinkMessage ask = shrinkMessage(kAskMagic, round, mine);
  for (size_t i = 1; i < members.size(); ++i) {
    // Each ask gets a few seconds of its own: connecting to a dead host takes all it is given.
    const util::Deadline d = util::Deadline::earliest(hellos, util::Deadline::afterMs(kAskMs));
    const Status s = b.sendUntil(members[i], kShrinkTag, &ask, sizeof(ask), d);
    asked[i] = !isError(s);
    if (isError(s)) fault(i, s, false);
  }
  for (size_t i = 1; i < members.size(); ++i) {
    if (unreachable[i]) continue;
    // A dead survivor is noticed quickly, and one that never calls stalls the others anyway: so
    // reading on past a failure costs little.
    ShrinkMessage h;
    const Status s = readHello(b, members[i], round, hellos, &h);
    const bool same = !isError(s) && h.magic == kHelloMagic && h.fingerprint == mine.fingerprint &&
                      h.survivors == mine.survivors && h.parentRanks == mine.parentRanks;
    if (!same) fault(i, s, !isError(s));
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
      const util::Deadline d = pass == 0 ? b.operationDeadline() : util::Deadline::afterMs(kLateVerdictMs);
      // One never asked (an earlier ask ran out of time) takes a verdict only of a round it answered.
      if (!asked[i] && isError(b.sendUntil(members[i], kShrinkTag, &ask, sizeof(ask), d))) continue;
      (void)b.sendUntil(members[i], kShrinkTag, &v, sizeof(v), d);  // a failure here is theirs to report
    }
  }
  if (v.status != ncclSuccess) {
    WEFT_WARN("ncclCommShrink (parent rank %d, first survivor): %s", b.rank(),
              faultText((Status)v.status, v.rank, b.rank()).c_str());
    return (Status)v.status;
  }
  *childId = v.id;
  return ncclSuccess;
}

Status otherSurvivor(bootstrap::Bootstrap& b, const std::vector<int>& members, const ShrinkMessage& mine,
                     ncclUniqueId* childId) {
  const int first = members[0];
  // Longer than the first survivor's wait for the hellos: if another survivor stalls, its verdict
  // names that one, rather than this rank timing out on the first survivor.
  const util::Deadline deadline = b.operationDeadline().extendedByMs(kVerdictGraceMs);
  // Every round found is answered, an earlier call's too (its first survivor passes that hello
  // over); the verdict taken is the one ending a round answered in this call. So a round of an
  // earlier call (this rank came late to it, or gave up on it before its ask came) is joined, and
  // its verdict, naming this rank as late, fails this call too: a stale verdict can only be a
  // failure (success needs this rank's hello of that round). Every survivor then calls again.
  uint64_t answered = 0;
  ShrinkMessage v;
  for (;;) {
    WEFT_TRY(b.recvUntil(first, kShrinkTag, &v, sizeof(v), deadline));
    if (v.magic == kAskMagic && v.round != 0) {
      const ShrinkMessage hello = shrinkMessage(kHelloMagic, v.round, mine);
      WEFT_TRY(b.sendUntil(first, kShrinkTag, &hello, sizeof(hello), deadline));
      answered = v.round;
    } else if (v.magic != kVerdictMagic || (answered != 0 && v.round == answered)) {
      break;
    }
  }
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
              first, faultText((Status)v.status, v.rank, b.rank()).c_str());
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
  ShrinkMessage mine;  // what this rank's messages carry
  memset(&mine, 0, sizeof(mine));
  mine.parentRanks = parent.nRanks();
  mine.survivors = (int32_t)members.size();
  mine.fingerprint = membersFingerprint(parent.nRanks(), members);
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
