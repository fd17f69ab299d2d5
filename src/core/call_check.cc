#include "core/call_check.h"

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

const char* callName(uint8_t call) {
  static const char* const names[kNumCollCalls] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce",
                                                   "ncclAllGather", "ncclReduceScatter", "ncclAlltoAll",
                                                   "ncclGather", "ncclScatter"};
  return call < kNumCollCalls ? names[call] : "an unknown collective";
}

std::string typeName(uint8_t type) {
  static const char* const names[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                                      "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16",
                                      "ncclFloat8e4m3", "ncclFloat8e5m2"};
  if (type < sizeof(names) / sizeof(names[0])) return names[type];
  return "datatype " + std::to_string(type);
}

std::string opName(uint8_t op) {
  static const char* const names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
  if (op == kUserRedOp) return "an op of ncclRedOpCreatePreMulSum";
  if (op < sizeof(names) / sizeof(names[0])) return names[op];
  return "op " + std::to_string(op);
}

// Bytes of an element, 0 for an unknown type.
uint64_t typeBytes(uint8_t type) {
  static const uint8_t bytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return type < sizeof(bytes) ? bytes[type] : 0;
}

}  // namespace

std::string describeCall(const CallSignature& call) {
  std::string text = std::string(callName(call.call)) + "(count " + std::to_string(call.count) + ", " +
                     typeName(call.dataType);
  if (call.redOp != kNoRedOp) text += ", " + opName(call.redOp);
  if (call.root >= 0) text += ", root " + std::to_string(call.root);
  return text + ")";
}

std::string callDifference(const CallSignature& a, const CallSignature& b) {
  if (a.call != b.call) return "the collective";
  std::vector<const char*> parts;
  // Calls that only move data work in NCCL when the ranks' types differ but their byte counts
  // agree (ncclInt8 x 4n on one rank, ncclFloat32 x n on another): such calls are let through.
  const bool movesOnly = a.redOp == kNoRedOp && b.redOp == kNoRedOp;
  const uint64_t bytesA = a.count * typeBytes(a.dataType), bytesB = b.count * typeBytes(b.dataType);
  if (!movesOnly || bytesA != bytesB || bytesA == 0) {
    if (a.count != b.count) parts.push_back("the count");
    if (a.dataType != b.dataType) parts.push_back("the datatype");
  }
  if (a.redOp != b.redOp) parts.push_back("the reduction");
  if (a.root != b.root) parts.push_back("the root");
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += i + 1 == parts.size() ? " and " : ", ";
    text += parts[i];
  }
  return text;
}

std::string describeFinding(uint64_t seq, int rank, const CallSignature& mine, int peer, const CallSignature& theirs) {
  char head[96];
  snprintf(head, sizeof(head), "collective #%" PRIu64 " on this communicator differs between ranks: rank %d called ", seq,
           rank);
  const std::string what = callDifference(mine, theirs);
  return head + describeCall(mine) + ", rank " + std::to_string(peer) + " called " + describeCall(theirs) + " (" +
         what + (what.find(" and ") == std::string::npos ? " differs)" : " differ)");
}

std::vector<int> callCheckNeighbors(const std::vector<uint64_t>& hostOf, int rank) {
  std::vector<int> local;
  for (size_t r = 0; r < hostOf.size(); ++r) {
    if (hostOf[r] == hostOf[rank]) local.push_back((int)r);
  }
  std::vector<int> neighbors;
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i] != rank) continue;
    if (i > 0) neighbors.push_back(local[i - 1]);
    if (i + 1 < local.size()) neighbors.push_back(local[i + 1]);
  }
  return neighbors;
}

// A neighbor's page is opened once, at the first call: every rank made its page before any rank's
// creation finished, so a page missing then (no shared memory there) never comes.
struct CallChecker::Neighbor {
  int rank;
  bool opened = false;
  std::unique_ptr<PeerLedger> page;
};

CallChecker::CallChecker(uint64_t commHash, int rank, std::vector<int> neighbors) : commHash_(commHash), rank_(rank) {
  for (int r : neighbors) neighbors_.push_back(Neighbor{r, false, nullptr});
}

CallChecker::~CallChecker() = default;

std::string CallChecker::check(uint64_t seq, const CallSignature& mine) {
  for (Neighbor& n : neighbors_) {
    if (!n.opened) {
      n.opened = true;
      n.page = PeerLedger::open(commHash_, n.rank);
      if (!n.page) {
        WEFT_INFO(log::kInit, "rank %d: rank %d's ledger cannot be read; calls are not compared with its calls",
                  rank_, n.rank);
      }
    }
    CallSignature theirs;
    if (n.page && n.page->recent(seq, &theirs) && !callDifference(mine, theirs).empty()) {
      return describeFinding(seq, rank_, mine, n.rank, theirs);
    }
  }
  return "";
}

FindingWatch::FindingWatch(uint64_t commHash, std::vector<int> ranks)
    : commHash_(commHash), ranks_(std::move(ranks)), pages_(ranks_.size()) {}

FindingWatch::~FindingWatch() = default;

bool FindingWatch::poll(int* rank, std::string* text) {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (!pages_[i]) pages_[i] = PeerLedger::open(commHash_, ranks_[i]);
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

Status noteCollectiveCall(ncclComm* comm, const CallSignature& call) {
  if (!comm->ledger) return ncclSuccess;
  const uint64_t seq = comm->ledger->publish(call);
  if (!comm->callChecker) {
    std::vector<int> neighbors;
    if (kCallCheck.get() != 0) {
      std::vector<uint64_t> hostOf(comm->nRanks);
      for (int r = 0; r < comm->nRanks; ++r) hostOf[r] = comm->peers[r].hostHash;
      neighbors = callCheckNeighbors(hostOf, comm->rank);
    }
    comm->callChecker = std::make_unique<CallChecker>(comm->commHash, comm->rank, std::move(neighbors));
  }
  const std::string finding = comm->callChecker->check(seq, call);
  if (finding.empty()) return ncclSuccess;
  WEFT_WARN("rank %d: %s. Every rank must make the same collective calls in the same order, with the same count, "
            "datatype, reduction and root. Nothing was launched for this call; the communicator is failed "
            "(ncclInvalidUsage): abort or destroy it", comm->rank, finding.c_str());
  comm->ledger->postFinding(seq, finding);
  comm->setLastError(log::lastErrorOfThread());
  comm->asyncError.store(ncclInvalidUsage);
  requestAbort(comm);
  return ncclInvalidUsage;
}

}  // namespace weft::core
