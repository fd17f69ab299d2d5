// Every rank of a communicator must make the same collective calls, in the same order, with the
// same count, datatype, reduction and root. When they do not, NCCL hangs or, worse, returns wrong
// numbers without a word (user-pains P5); its check (NCCL_CHECK_MODE, 2.29.7) is opt-in. weft
// compares the calls of the ranks of one host as they are made, at the cost of a few stores and
// two loads of shared memory per call:
//   - each call is published in the rank's ledger (op_ledger.h), then the rank reads the same call
//     of its neighbors: the ranks of its host just before and after it. Publishing ends with a full
//     fence on both sides, so of two neighbors at least the one that calls second sees the other's
//     call. Any difference between two ranks of the host shows between some pair of neighbors, and
//     that pair's second caller finds it before it launches anything;
//   - it refuses the call (ncclInvalidUsage, naming both calls and what differs), fails its
//     communicator and posts the finding in its ledger; the watchdog of every other rank of the host
//     reads it within one interval and fails theirs, which stops their kernels waiting for the call.
// Sends and receives are matched the same way, per pair of ranks of the host: the n-th ncclSend
// from A to B is compared with B's n-th ncclRecv from A, by size in bytes, when the second of the
// two is called (zero-byte ones are skipped: both sides may leave them out). A size that differs
// would hang both ranks or cut the data short.
// Not seen: ranks of other hosts, a rank without shared memory, a neighbor more than
// OpLedger::kRecentCalls calls (kRecentP2p sends) ahead. NCCL_WEFT_CALL_CHECK=0 turns the
// comparison off.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/op_ledger.h"
#include "core/status.h"

struct ncclComm;

namespace weft::core {

enum CollCall : uint8_t {
  kCallAllReduce, kCallBroadcast, kCallReduce, kCallAllGather, kCallReduceScatter,
  kCallAlltoAll, kCallGather, kCallScatter, kNumCollCalls
};

// CallSignature::redOp for a call without a reduction, and for an ncclRedOpCreatePreMulSum op
// (its scalar may differ between ranks; only the kind of operation must agree).
constexpr uint8_t kNoRedOp = 0xff;
constexpr uint8_t kUserRedOp = 0xfe;

// Pure: bytes of an element of ncclDataType_t `type`, 0 for an unknown type.
uint64_t callTypeBytes(uint8_t type);
// Pure: "ncclAllReduce(count 1024, ncclFloat32, ncclSum)"; roots and user ops named as well.
std::string describeCall(const CallSignature& call);
// Pure: "" when the calls agree, else what differs: "the count", "the datatype and the root", ...
// Calls without a reduction agree on count and datatype when their sizes in bytes agree.
std::string callDifference(const CallSignature& a, const CallSignature& b);
// Pure: the sentence of a finding about call `seq` between this rank and a neighbor.
std::string describeFinding(uint64_t seq, int rank, const CallSignature& mine, int peer, const CallSignature& theirs);
// Pure: the sentence of a finding about send number `seq` from `sender` to `receiver`.
std::string describeP2pFinding(uint64_t seq, int sender, const P2pSignature& sent, int receiver,
                               const P2pSignature& received);
// Pure: the ranks of `rank`'s host (hostOf[r] names rank r's host), in rank order, itself included:
// a rank's host index is its place in this list.
std::vector<int> hostRanksOf(const std::vector<uint64_t>& hostOf, int rank);
// Pure: the ranks whose calls `rank` compares with its own: the ranks of its host (hostOf[r] names
// rank r's host) just before and after it, in rank order.
std::vector<int> callCheckNeighbors(const std::vector<uint64_t>& hostOf, int rank);

// The enqueue side of one rank: the pages of the ranks of its host, each mapped at its first use.
class CallChecker {
 public:
  // `neighbors`: whose collectives are compared; `hostRanks`: as hostRanksOf (empty: the
  // neighbors and this rank); `compareP2p` false: sends and receives are published, not compared.
  CallChecker(uint64_t commHash, int rank, std::vector<int> neighbors, std::vector<int> hostRanks = {},
              bool compareP2p = true);
  ~CallChecker();
  // "" when no neighbor made call `seq` differently (or none has made it yet), else the finding.
  std::string check(uint64_t seq, const CallSignature& mine);
  // "" when `peer` has not yet made the receive (send) that meets this rank's send (receive)
  // number `seq` to (from) it, or made it alike; else the finding.
  std::string checkP2p(int peer, P2pDirection dir, uint64_t seq, const P2pSignature& mine);
  // `rank`'s place among the ranks of this host; -1 when it is on another host.
  int hostIndex(int rank) const;

 private:
  struct Page;
  const PeerLedger* page(int rank);
  uint64_t commHash_;
  int rank_;
  std::vector<int> neighbors_;
  std::vector<int> hostRanks_;
  std::vector<Page> pages_;  // by host index
  bool compareP2p_;
};

// The findings posted by the other ranks of the host. Their pages are mapped by the constructor
// (made once the communicator is whole: every page exists then), and stay mapped when their
// owners remove them: a finder that aborts at once is still read. poll() changes nothing, so the
// watchdog and the calling thread may share one.
class FindingWatch {
 public:
  FindingWatch(uint64_t commHash, std::vector<int> ranks);
  ~FindingWatch();
  // The first finding posted by one of the ranks: true with its rank and sentence.
  bool poll(int* rank, std::string* text) const;

 private:
  uint64_t commHash_;
  std::vector<int> ranks_;
  std::vector<std::unique_ptr<PeerLedger>> pages_;
};

// Publishes a collective call in the communicator's ledger and compares it with the neighbors'
// (on by default). A difference fails the communicator (ncclInvalidUsage; its kernels stop) and
// the call returns ncclInvalidUsage without launching.
[[nodiscard]] Status noteCollectiveCall(ncclComm* comm, const CallSignature& call);
// The same for a send to (receive from) `peer`; a difference names both calls and their sizes.
[[nodiscard]] Status noteP2pCall(ncclComm* comm, int peer, P2pDirection dir, const P2pSignature& op);

// Logs the finding `text` posted by rank `finder` and fails `comm` (ncclInvalidUsage, kernels stop).
void failOnFinding(ncclComm* comm, int finder, const std::string& text);
// A call that failed because a peer went away may have a root cause: the peer refused a call that
// differed and aborted. True when a rank of the host posted a finding (comm->findings): `comm`
// then fails on it.
bool adoptHostFinding(ncclComm* comm);

// The ranks of the communicator's host other than itself, whose findings its watchdog reads.
std::vector<int> sameHostPeers(const ncclComm* comm);

}  // namespace weft::core
