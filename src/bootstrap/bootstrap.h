// The bootstrap: the out-of-band TCP channel between the ranks of a communicator, used during
// init (and by split, shrink, ...) to exchange small amounts of host data before any GPU
// transport exists.
//
// init(): each rank opens its own listen socket, says hello to the root named by the unique id
// (rank, nranks, listen address) and receives its ring neighbours' addresses; the ranks then
// build the full address table with a doubling (Bruck) allgather that passes on the addresses its
// next round needs. After that, send/recv connect lazily to a peer's listen address, and
// allGather (Bruck) and barrier (dissemination) run over those connections: ceil(log2 n) rounds
// each, with rank +- 2^k, so a rank talks with at most 4 log2(n) peers.
//
// Every call has a deadline (NCCL_BOOTSTRAP_TIMEOUT seconds, default 300, 0 = forever) and polls
// the abort flag given to init(). Errors name the peer rank, its address and the operation. A
// rank that gives up during init or a collective tells the peers it is connected with, so that a
// failure spreads at once with its root cause instead of as a chain of timeouts; a peer we wait
// for that never connected is probed, so its death is noticed too (see Messenger).
//
// Result codes: ncclRemoteError = a peer or the root exited / closed / reported a failure;
// ncclSystemError = socket failures, timeouts (text contains "timed out") and abort (text
// contains "aborted"); ncclInvalidArgument = bad id or arguments; ncclInvalidUsage = the ranks
// disagree (nranks, sizes of a send/recv pair, ids) or two threads used one Bootstrap at once.
//
// Not thread-safe: one thread at a time per Bootstrap (a concurrent call fails, never corrupts).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "bootstrap/messenger.h"
#include "bootstrap/root.h"
#include "bootstrap/unique_id.h"
#include "core/status.h"
#include "nccl.h"

namespace weft::bootstrap {

class Bootstrap {
 public:
  // Joins the rendezvous of `id` as `rank` of `nRanks`. `abort` (may be null) must outlive the
  // Bootstrap; raising it makes every wait return within about 100 ms.
  [[nodiscard]] static Status init(const ncclUniqueId& id, int rank, int nRanks, const std::atomic<bool>* abort,
                                   std::unique_ptr<Bootstrap>* out);
  // ncclCommInitRankScalable: nIds roots (1 <= nIds <= nRanks), every rank passing the same ids in
  // the same order. Ranks are split evenly and in order among the roots (wire::rootRange).
  [[nodiscard]] static Status init(const ncclUniqueId* ids, int nIds, int rank, int nRanks,
                                   const std::atomic<bool>* abort, std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int nRanks() const { return nRanks_; }

  // In place: data holds nRanks slices of bytesPerRank, this rank's at rank * bytesPerRank; on
  // return every slice holds its rank's data. All ranks call it with the same bytesPerRank.
  [[nodiscard]] Status allGather(void* data, size_t bytesPerRank);
  // A message to/from one peer, matched on (peer, tag) in order; recv's size must equal the size
  // sent (a mismatch is an error naming both). Messages that arrive before their recv are queued.
  // peer == rank() is allowed (send first).
  [[nodiscard]] Status send(int peer, int tag, const void* data, size_t bytes);
  [[nodiscard]] Status recv(int peer, int tag, void* data, size_t bytes);
  // send and recv with a deadline of the caller's (one deadline shared by several waits, or a longer one).
  [[nodiscard]] Status sendUntil(int peer, int tag, const void* data, size_t bytes, const util::Deadline& deadline);
  [[nodiscard]] Status recvUntil(int peer, int tag, void* data, size_t bytes, const util::Deadline& deadline);
  // The deadline one operation gets: NCCL_BOOTSTRAP_TIMEOUT from now.
  util::Deadline operationDeadline() const;
  // Returns once every rank has entered the barrier.
  [[nodiscard]] Status barrier();

  // This rank failed on its own (not in the bootstrap: out of memory, a CUDA error) while its peers
  // may wait for it in a bootstrap operation: tells every peer (up to 64, briefly each), whose
  // waits then fail at once naming this rank and `why`, rather than at their deadline.
  void giveUp(const std::string& why);

  // Before the bootstrap is freed: a wait of another thread in it (a split or shrink the caller
  // aborts from a watchdog thread, say) ends within a poll slice, also where no abort flag is polled
  // (ncclCommShrink, ncclCommRevoke); later calls fail at once; and this returns once that thread
  // has left it, and every Use has ended (waiting at most ~5 s).
  void close();
  // Held across the calls of one agreement (a split's, a shrink's) and the caller's reads of the
  // communicator around them: close() waits for it, not only for the call in progress.
  class Use {
   public:
    explicit Use(Bootstrap& b) : b_(b) { b_.uses_.fetch_add(1); }
    ~Use() { b_.uses_.fetch_sub(1); }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    Bootstrap& b_;
  };

  // ncclCommShrink and ncclCommRevoke talk over the bootstrap of a communicator that may have
  // failed: they swap the abort flag its waits poll (null: none) and drop earlier failure notices.
  void setAbortFlag(const std::atomic<bool>* abort);
  const std::atomic<bool>* abortFlag() const { return abort_; }
  void forgetFailureNotices();

  // "10.0.0.4:41234": where `rank` listens, for error messages ("address unknown" if not known).
  std::string peerAddress(int rank) const;
  const SocketAddress& listenAddress() const { return messenger_.listenAddress(); }
  // What this rank sent and received so far, and with how many peers it has connections.
  const Messenger::Traffic& traffic() const { return messenger_.traffic(); }
  size_t connectedPeers() const { return messenger_.connectedPeers().size(); }
  // "sent 12 messages (3.1 KiB), received 12 (3.1 KiB), 6 peers connected" for logs.
  std::string trafficText() const;
  // The text of the latest failure of this bootstrap (also logged as WARN); empty if none.
  const std::string& failureText() const { return messenger_.failureText(); }

 private:
  Bootstrap(int rank, int nRanks, uint64_t jobKey, const std::atomic<bool>* abort);
  Status rendezvous(const std::vector<UniqueIdInfo>& ids, const util::Deadline& deadline);
  Status exchangeAddresses(const util::Deadline& deadline);
  Status doublingAllGather(char* data, size_t bytesPerRank, const util::Deadline& deadline, const char* op,
                           std::vector<std::pair<int, SocketAddress>>* learned);
  Status learnAddress(int sender, int rank, const void* wireAddress,
                      std::vector<std::pair<int, SocketAddress>>* learned);
  std::vector<int> doublingPeers() const;
  // After a failed collective: tell the peers that wait on this rank (best effort).
  void spreadFailure(const std::vector<int>& peers);
  class Busy;

  int rank_;
  int nRanks_;
  const std::atomic<bool>* abort_;
  Messenger messenger_;
  std::unique_ptr<Root> ownRoot_;  // NCCL_COMM_ID: the root this rank started
  std::atomic<bool> busy_{false};
  std::atomic<int> uses_{0};
  uint64_t allGathers_ = 0;
  uint64_t barriers_ = 0;
};

}  // namespace weft::bootstrap
