// The bootstrap root: the rendezvous point named by a unique id. Each rank connects, sends a
// RootHello (rank, nranks, its listen address); once every rank of its group has arrived the root
// answers each one with the addresses of its two ring neighbours only (not the whole table: that
// is O(nranks) per rank and would make the root a bottleneck), then exits. Ranks build the full
// table themselves with a ring allgather.
//
// Several roots (ncclCommInitRankScalable with nId ids): ranks are split evenly, root j serving
// ranks [lo_j, hi_j) (wire::rootRange). Root j must also give its last rank a successor, the first
// rank of group j+1, so that rank also says hello to root j (and learns its own predecessor, root
// j's last rank, from the answer). No root-to-root traffic is needed.
//
// The root never trusts its input: strangers, stale jobs and malformed frames are logged and
// dropped; inconsistent hellos (nranks differ, a rank twice, a rank of another root), a rank that
// leaves before the end, and the deadline fail the rendezvous, and every waiting rank is told why.
// A failed root answers ranks that arrive late with the same error for kFailedLingerMs more, then
// ends (its thread and sockets are freed; a later rank finds nothing listening).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "bootstrap/socket.h"
#include "core/status.h"

namespace weft::bootstrap {

class Root {
 public:
  // Binds and listens now, so the address is known and early ranks queue in the backlog.
  // timeoutSeconds < 0 reads NCCL_BOOTSTRAP_TIMEOUT; 0 waits forever.
  [[nodiscard]] static Status create(const SocketAddress& bindAddress, uint64_t jobKey,
                                     std::unique_ptr<Root>* out, int64_t timeoutSeconds = -1);
  ~Root();
  Root(const Root&) = delete;
  Root& operator=(const Root&) = delete;

  const SocketAddress& address() const { return address_; }

  // Serves one rendezvous on the calling thread. Returns ncclSuccess once every rank of the group
  // was answered; otherwise after telling the arrived ranks why it failed. The deadline starts
  // with the first valid hello (ncclGetUniqueId may come long before the ranks start). `stop`
  // (may be null) ends it early.
  [[nodiscard]] Status serve(const std::atomic<bool>* stop);

  // serve() on a thread owned by this object; join() returns its result. The destructor stops and
  // joins a running thread.
  void start(const std::atomic<bool>* stop);
  [[nodiscard]] Status join();

  // Why serve() failed (the text also logged as WARN); empty after success.
  const std::string& errorText() const { return errorText_; }

  // serve() on a detached thread that owns the root (ncclGetUniqueId). The thread ends when the
  // rendezvous ends; if no rank ever arrives it waits forever, as NCCL's root does.
  static void launchDetached(std::unique_ptr<Root> root);
  // A rank of this process gave up its rendezvous with the detached root of `jobKey` (its creation
  // was aborted or failed): that root fails the rendezvous at once, telling the ranks that arrived
  // why, instead of waiting NCCL_BOOTSTRAP_TIMEOUT for a rank that will not come. No-op when this
  // process runs no such root.
  static void abandonDetached(uint64_t jobKey, int rank, const std::string& why);
  // Detached roots still serving, for tests that must not fork while one runs.
  static int detachedRunning();

 private:
  struct Conn;
  class Session;
  Root() = default;

  Fd listener_;
  SocketAddress address_;
  uint64_t jobKey_ = 0;
  int64_t timeoutSeconds_ = 0;
  std::atomic<bool> stopSelf_{false};
  std::atomic<bool> abandoned_{false};  // abandonDetached: abandonText_ is set before it
  std::string abandonText_;
  const std::atomic<bool>* stopOther_ = nullptr;
  std::thread thread_;
  Status threadResult_ = ncclSuccess;
  std::string errorText_;
};

}  // namespace weft::bootstrap
