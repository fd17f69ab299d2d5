// What each rank of a communicator has asked for, where the other ranks of its host can read it:
// a small shared-memory page per (communicator, rank), /dev/shm/weft-<commHash>-<rank>, holding
//   - the number of collectives the rank has issued on the communicator. When this rank's work
//     stops making progress, the watchdog reads its peers' pages: a rank that has issued fewer
//     collectives than this one has not made the call this rank waits in;
//   - the arguments of its last kRecentCalls collectives, so that ranks compare their calls as
//     they make them (core/call_check.h), and the first difference the rank found;
//   - per rank of the host, its latest kRecentP2p sends to it and receives from it (count and
//     datatype), numbered per pair and direction as NCCL matches them: the n-th send from A to B
//     meets B's n-th receive from A;
//   - on how many channels a kernel of a CUDA graph replay runs, and since when (graph replays are
//     not calls, so the counts above do not see them; the watchdog copies this from the kernels'
//     stamps every half second);
//   - the memory the communicator holds (runtime/mem_tally.h), for weft-status.
// Only the owning rank writes its page; every other rank of the host maps it read-only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::core {

// What one collective call asked for: what every rank of the communicator must ask for alike.
struct CallSignature {
  uint8_t call = 0;      // core::CollCall (call_check.h)
  uint8_t dataType = 0;  // ncclDataType_t
  uint8_t redOp = 0;     // call_check.h: the caller's built-in ncclRedOp_t, kUserRedOp or kNoRedOp
  int32_t root = -1;     // -1: the call has no root
  uint64_t count = 0;    // as passed (per-rank block for AllGather, ReduceScatter, AlltoAll)

  bool operator==(const CallSignature& o) const {
    return call == o.call && dataType == o.dataType && redOp == o.redOp && root == o.root && count == o.count;
  }
  bool operator!=(const CallSignature& o) const { return !(*this == o); }
};

// One send or receive, as the peer must mirror it.
struct P2pSignature {
  uint64_t count = 0;
  uint8_t dataType = 0;  // ncclDataType_t
};
enum class P2pDirection : uint8_t { kSend = 0, kRecv = 1 };

// Bytes a communicator holds on its rank, by place (runtime::MemPlace).
struct LedgerMemory {
  int64_t gpu = 0, pinnedHost = 0, sharedHost = 0;
};

struct LedgerPage;

class OpLedger {
 public:
  // How many of its latest calls a page keeps (a peer further ahead than this is not compared).
  static constexpr uint64_t kRecentCalls = 512;
  // How many of its latest sends to (receives from) one peer a page keeps.
  static constexpr uint64_t kRecentP2p = 64;

  // This rank's page, made and mapped read-write; null (logged at INFO) where shared memory cannot
  // be made (a container without /dev/shm): the hang report then names no ranks, and the calls
  // of this rank are not compared. `hostRanks`: how many ranks of the communicator are on this
  // host (this one included); their sends and receives are kept by host index (rank order).
  static std::unique_ptr<OpLedger> create(uint64_t commHash, int rank, int hostRanks = 0);
  ~OpLedger();  // unmaps and removes the page
  OpLedger(const OpLedger&) = delete;
  OpLedger& operator=(const OpLedger&) = delete;

  // Records the next collective and returns its number (1, 2, ...). Ends with a full fence: a
  // peer's page read after it is read after this call became visible (call_check.h relies on it).
  uint64_t publish(const CallSignature& call);
  uint64_t collectives() const;
  // Records the next send to (receive from) the rank of host index `hostPeer` and returns its
  // number on that pair and direction (1, 2, ...); a full fence too.
  uint64_t publishP2p(int hostPeer, P2pDirection dir, const P2pSignature& op);
  // How many sends to (receives from) the rank of host index `hostPeer` were published.
  uint64_t p2pOps(int hostPeer, P2pDirection dir) const;
  // Where the records stand: taken before calls that may not happen after all (a group that fails
  // as a whole, ncclGroupSimulateEnd), and handed to retract() to take them back, so that the
  // calls made instead get their numbers.
  struct Mark {
    uint64_t collectives = 0;
    std::vector<uint64_t> p2pOps;  // [hostPeer * 2 + direction]
  };
  Mark mark() const;
  void mark(Mark* out) const;  // the same into *out, reusing its storage (hot paths)
  void retract(const Mark& mark);
  // On how many channels a graph replay's kernel runs (0: none), and since when the watchdog has
  // seen the same one (CLOCK_MONOTONIC milliseconds, the same clock for every process of the host).
  void publishReplays(int channels, int64_t sinceMs);
  void publishMemory(const LedgerMemory& memory);
  // Records the first difference this rank found (later ones are dropped); peers read it.
  void postFinding(uint64_t seq, const std::string& text);

  // Another rank's count, or -1 when its page cannot be read or is not that rank's (wrong magic,
  // communicator or rank: a stale or foreign file is never believed).
  static int64_t readPeer(uint64_t commHash, int rank);
  static std::string pageName(uint64_t commHash, int rank);

 private:
  OpLedger(LedgerPage* page, size_t bytes, std::string name) : page_(page), bytes_(bytes), name_(std::move(name)) {}
  LedgerPage* page_;
  size_t bytes_;
  std::string name_;
};

// Another rank's page, mapped read-only for as long as this object lives.
class PeerLedger {
 public:
  // Null when the page does not exist (yet) or is not that rank's.
  static std::unique_ptr<PeerLedger> open(uint64_t commHash, int rank);
  ~PeerLedger();
  PeerLedger(const PeerLedger&) = delete;
  PeerLedger& operator=(const PeerLedger&) = delete;

  uint64_t collectives() const;
  int64_t pid() const;                               // the process that owns the page
  int replayChannels(int64_t* sinceMs) const;        // as published by OpLedger::publishReplays
  LedgerMemory memory() const;                       // as published by OpLedger::publishMemory
  uint64_t hostRanks() const { return hostRanks_; }  // ranks of the host whose sends it keeps
  // The peer's call number `seq`; false when it has not made it yet, or its slot already holds a
  // later call.
  bool recent(uint64_t seq, CallSignature* out) const;
  // The peer's send number `seq` to (receive from) the rank of host index `hostPeer`; false as
  // recent(), or when the page keeps no such rank.
  bool recentP2p(int hostPeer, P2pDirection dir, uint64_t seq, P2pSignature* out) const;
  // As OpLedger::p2pOps; -1 when the page keeps no such rank.
  int64_t p2pOps(int hostPeer, P2pDirection dir) const;
  // The first difference the peer found: its call number and sentence; false when none.
  bool finding(uint64_t* seq, std::string* text) const;

 private:
  PeerLedger(const LedgerPage* page, size_t bytes, uint64_t hostRanks)
      : page_(page), bytes_(bytes), hostRanks_(hostRanks) {}
  const LedgerPage* page_;
  size_t bytes_;
  uint64_t hostRanks_;  // as checked against the mapping at open: its owner may rewrite the header
};

// Pure: the sentence that names the ranks behind this one. `peers[r]` is rank r's count (-1:
// unknown); `self` is this rank. "" when no rank is behind.
std::string describeLaggards(int self, uint64_t mine, const std::vector<int64_t>& peers);

// Pure: "rank 3", "ranks 0, 1 and 3" (every rank named, in the order given).
std::string rankListText(const std::vector<int>& ranks);

// Pure: the sentence that names the peers of the host that run no graph replay's kernel on the
// communicator while this rank's waits (`idlePeers`, in rank order); "" when there are none.
std::string describeReplayLaggards(const std::vector<int>& idlePeers);

// What this rank and one peer of its host have published of their sends and receives to each other
// (-1: unknown).
struct P2pTally {
  int peer = -1;
  int64_t sentToPeer = 0, receivedFromPeer = 0;  // this rank's
  int64_t peerSentHere = -1, peerReceivedHere = -1;
};
// Pure: the sentence that names the peers that have posted fewer sends to this rank than it posted
// receives from them, or fewer receives than its sends; "" when none.
std::string describeP2pLaggards(const std::vector<P2pTally>& tallies);

}  // namespace weft::core
