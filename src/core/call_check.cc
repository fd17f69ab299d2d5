#include "core/call_check.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "core/comm_init.h"
#include "core/communicator.h"
#include "core/log.h"
#include "core/param.h"
#include "core/peer_info.h"

namespace weft::core {
namespace {

const param::IntParam kCallCheck{"NCCL_WEFT_CALL_CHECK", 1};

}  // namespace

std::vector<int> hostRanksOf(const std::vector<uint64_t>& hostOf, int rank) {
  std::vector<int> local;
  for (size_t r = 0; r < hostOf.size(); ++r) {
    if (hostOf[r] == hostOf[rank]) local.push_back((int)r);
  }
  return local;
}

std::vector<int> callCheckNeighbors(const std::vector<uint64_t>& hostOf, int rank) {
  const std::vector<int> local = hostRanksOf(hostOf, rank);
  std::vector<int> neighbors;
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i] != rank) continue;
    if (i > 0) neighbors.push_back(local[i - 1]);
    if (i + 1 < local.size()) neighbors.push_back(local[i + 1]);
  }
  return neighbors;
}

// A rank's page is opened once, at its first use: every rank made its page before any rank's
// creation finished, so a page missing then (no shared memory there) never comes.
struct CallChecker::Page {
  bool opened = false;
  std::unique_ptr<PeerLedger> ledger;
};

CallChecker::CallChecker(uint64_t commHash, int rank, std::vector<int> neighbors, std::vector<int> hostRanks,
                         bool compareP2p)
    : commHash_(commHash),
      rank_(rank),
      neighbors_(std::move(neighbors)),
      hostRanks_(std::move(hostRanks)),
      compareP2p_(compareP2p) {
  if (hostRanks_.empty()) {
    hostRanks_ = neighbors_;
    hostRanks_.push_back(rank);
    std::sort(hostRanks_.begin(), hostRanks_.end());
  }
  pages_.resize(hostRanks_.size());
}

CallChecker::~CallChecker() = default;

int CallChecker::hostIndex(int rank) const {
  const auto it = std::lower_bound(hostRanks_.begin(), hostRanks_.end(), rank);
  return it != hostRanks_.end() && *it == rank ? (int)(it - hostRanks_.begin()) : -1;
}

const PeerLedger* CallChecker::page(int rank) {
  const int index = hostIndex(rank);
  if (index < 0 || rank == rank_) return nullptr;
  Page& p = pages_[index];
  if (!p.opened) {
    p.opened = true;
    p.ledger = PeerLedger::open(commHash_, rank);
    if (!p.ledger) {
      WEFT_INFO(log::kInit, "rank %d: rank %d's ledger cannot be read; calls are not compared with its calls", rank_,
                rank);
    }
  }
  return p.ledger.get();
}

std::string CallChecker::check(uint64_t seq, const CallSignature& mine) {
  for (int n : neighbors_) {
    const PeerLedger* ledger = page(n);
    CallSignature theirs;
    if (ledger && ledger->recent(seq, &theirs) && !callDifference(mine, theirs).empty()) {
      return describeFinding(seq, rank_, mine, n, theirs);
    }
  }
  return "";
}

std::string CallChecker::checkP2p(int peer, P2pDirection dir, uint64_t seq, const P2pSignature& mine) {
  if (!compareP2p_) return "";
  const PeerLedger* ledger = page(peer);
  const P2pDirection theirDir = dir == P2pDirection::kSend ? P2pDirection::kRecv : P2pDirection::kSend;
  P2pSignature theirs;
  if (!ledger || !ledger->recentP2p(hostIndex(rank_), theirDir, seq, &theirs)) return "";
  const uint64_t myBytes = mine.count * callTypeBytes(mine.dataType);
  const uint64_t theirBytes = theirs.count * callTypeBytes(theirs.dataType);
  const bool same =
      myBytes != 0 ? myBytes == theirBytes : mine.count == theirs.count && mine.dataType == theirs.dataType;
  if (same) return "";
  return dir == P2pDirection::kSend ? describeP2pFinding(seq, rank_, mine, peer, theirs)
                                    : describeP2pFinding(seq, peer, theirs, rank_, mine);
}

FindingWatch::FindingWatch(uint64_t commHash, std::vector<int> ranks)
    : commHash_(commHash), ranks_(std::move(ranks)) {
  for (int r : ranks_) pages_.push_back(PeerLedger::open(commHash_, r));
}

FindingWatch::~FindingWatch() = default;

bool FindingWatch::poll(int* rank, std::string* text) const {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    uint64_t seq = 0;
    if (pages_[i] && pages_[i]->finding(&seq, text)) {
      *rank = ranks_[i];
      return true;
    }
  }
  return false;
}

std::vector<int> sameHostPeers(const ncclComm* comm) {
  std::vector<int> ranks;
  for (int r = 0; r < comm->nRanks; ++r) {
    if (r != comm->rank && comm->peers[r].hostHash == comm->peers[comm->rank].hostHash) ranks.push_back(r);
  }
  return ranks;
}

namespace {

// After the warning that says why: the communicator fails with it, and its kernels stop.
void failAsMisused(ncclComm* comm) {
  comm->setLastError(log::lastErrorOfThread());
  comm->asyncError.store(ncclInvalidUsage);
  requestAbort(comm);
}

}  // namespace

void failOnFinding(ncclComm* comm, int finder, const std::string& text) {
  WEFT_WARN("rank %d: rank %d found that %s. This communicator is failed (ncclInvalidUsage) and its pending work "
            "aborted: abort or destroy it", comm->rank, finder, text.c_str());
  failAsMisused(comm);
}

bool adoptHostFinding(ncclComm* comm) {
  int finder = -1;
  std::string text;
  if (!comm->findings || !comm->findings->poll(&finder, &text)) return false;
  failOnFinding(comm, finder, text);
  return true;
}

namespace {

constexpr const char* kCollectiveAdvice =
    "Every rank must make the same collective calls in the same order, with the same count, datatype, reduction "
    "and root";
constexpr const char* kP2pAdvice =
    "The n-th ncclSend from a rank to a peer must match the peer's n-th ncclRecv from that rank in size (count "
    "times the datatype's bytes)";

CallChecker& checkerOf(ncclComm* comm) {
  if (!comm->callChecker) {
    std::vector<uint64_t> hostOf(comm->nRanks);
    for (int r = 0; r < comm->nRanks; ++r) hostOf[r] = comm->peers[r].hostHash;
    // Off, the calls are still published: the hang report counts them.
    const bool compare = kCallCheck.get() != 0;
    std::vector<int> neighbors;
    if (compare) neighbors = callCheckNeighbors(hostOf, comm->rank);
    comm->callChecker = std::make_unique<CallChecker>(comm->commHash, comm->rank, std::move(neighbors),
                                                      hostRanksOf(hostOf, comm->rank), compare);
  }
  return *comm->callChecker;
}

// The finder's side: refuse the call, fail the communicator, tell the other ranks of the host.
Status refuseCall(ncclComm* comm, uint64_t seq, const std::string& finding, const char* advice) {
  WEFT_WARN("rank %d: %s. %s. Nothing was launched for this call; the communicator is failed (ncclInvalidUsage): "
            "abort or destroy it", comm->rank, finding.c_str(), advice);
  comm->ledger->postFinding(seq, finding + ". " + advice);
  failAsMisused(comm);
  return ncclInvalidUsage;
}

}  // namespace

Status noteCollectiveCall(ncclComm* comm, const CallSignature& call) {
  if (!dev::kDiagnosticHooks || !comm->ledger) return ncclSuccess;
  const uint64_t seq = comm->ledger->publish(call);
  const std::string finding = checkerOf(comm).check(seq, call);
  return finding.empty() ? ncclSuccess : refuseCall(comm, seq, finding, kCollectiveAdvice);
}

Status noteP2pCall(ncclComm* comm, int peer, P2pDirection dir, const P2pSignature& op) {
  if (!dev::kDiagnosticHooks || !comm->ledger || op.count == 0 || peer == comm->rank) return ncclSuccess;
  CallChecker& checker = checkerOf(comm);
  const int hostPeer = checker.hostIndex(peer);
  if (hostPeer < 0) return ncclSuccess;  // another host
  const uint64_t seq = comm->ledger->publishP2p(hostPeer, dir, op);
  const std::string finding = checker.checkP2p(peer, dir, seq, op);
  return finding.empty() ? ncclSuccess : refuseCall(comm, seq, finding, kP2pAdvice);
}

}  // namespace weft::core
