// Passing file descriptors between the processes of one job on one host (cuMem memory is shared
// as a POSIX fd, which only the kernel can carry from one process to another: SCM_RIGHTS over a
// Unix-domain socket).
//
// Each process creates one FdEndpoint, a SOCK_SEQPACKET listener named after (job key, rank), and
// must do so before its rank is published to peers (before the bootstrap exchange), so that a
// peer never sends to an endpoint that does not exist yet: "nothing listens there" then means
// "that process exited", and senders and waiters can fail at once, naming the rank.
//
// Wire: one connection per fd; one message = FdFrame {magic, job key, length, sender rank, pid,
// payload bytes, tag} with the fd attached. Small messages (sendMessage) carry up to
// kMaxMessageBytes of payload after the frame and one fd or none; they are held in arrival order
// until takeMessages collects them. The endpoint's thread accepts connections, checks the peer's uid,
// the magic, the job key and the length, and keeps the fd until recvFd(senderRank, tag) takes it.
// Anything else (a stranger, another job, garbage, a second fd) is logged and dropped, and any fd
// it carried is closed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"
#include "util/unique_fd.h"

namespace weft::transport::p2p {

using Clock = std::chrono::steady_clock;

// Where an endpoint listens: a name in Linux's abstract socket namespace (no file; disappears with
// the process; scoped to the network namespace) or a socket file (mode 0600).
struct FdAddress {
  std::string name;  // abstract: without the leading NUL; else the file path
  bool abstract = true;
  std::string describe() const;  // "@weft-fd-..." or the path, for messages
};

// The address of `rank`'s endpoint in job `jobKey`: abstract when `dir` is empty, else a file in
// `dir`. Every process of the job must use the same `dir`.
FdAddress fdAddressOf(uint64_t jobKey, int rank, const std::string& dir);

// WEFT_FD_SOCKET_DIR, or "" (abstract namespace). Set it where the ranks of one host share a
// directory but not a network namespace (e.g. containers with their own network).
std::string fdSocketDirFromEnv();

class FdEndpoint {
 public:
  // Binds and listens at fdAddressOf(jobKey, rank, dir) and starts the endpoint's thread.
  [[nodiscard]] static Status create(uint64_t jobKey, int rank, const std::string& dir,
                                     std::unique_ptr<FdEndpoint>* out);
  FdEndpoint(const FdEndpoint&) = delete;
  FdEndpoint& operator=(const FdEndpoint&) = delete;
  ~FdEndpoint();  // stops the thread, closes every fd it still holds, removes a socket file

  const FdAddress& address() const { return address_; }
  int rank() const { return rank_; }
  uint64_t jobKey() const { return jobKey_; }

  // Sends a duplicate of `fd` (the caller keeps its own) to rank `toRank`'s endpoint, labelled
  // `tag`. Fails at once with ncclRemoteError if nothing listens there, and at the deadline or
  // when *abort becomes true (abort may be NULL) if the peer's queue stays full.
  [[nodiscard]] Status sendFd(int toRank, int fd, uint64_t tag, Clock::time_point deadline,
                              const std::atomic<bool>* abort);
  // The same to an explicit address (`toRank` only names the peer in messages and frames).
  [[nodiscard]] Status sendFdTo(const FdAddress& to, int toRank, int fd, uint64_t tag, Clock::time_point deadline,
                                const std::atomic<bool>* abort);

  // Waits for the fd that rank `fromRank` sent with `tag`; fds for other (rank, tag) pairs stay
  // for their own callers. Fails with ncclRemoteError at the deadline or as soon as fromRank's
  // endpoint is found gone (its process exited), and with ncclInternalError when *abort becomes
  // true. Safe to call from several threads.
  [[nodiscard]] Status recvFd(int fromRank, uint64_t tag, Clock::time_point deadline, const std::atomic<bool>* abort,
                              util::UniqueFd* out);

  // Number of received fds not yet taken by recvFd (tests, diagnostics).
  size_t heldCount();

  // A small message to rank `toRank`: `bytes` (1..kMaxMessageBytes) of `data` and a duplicate of
  // `fd` when fd >= 0. Fails and waits as sendFd does.
  static constexpr size_t kMaxMessageBytes = 512;
  [[nodiscard]] Status sendMessage(int toRank, uint64_t tag, const void* data, size_t bytes, int fd,
                                   Clock::time_point deadline, const std::atomic<bool>* abort);
  struct Message {
    int fromRank = -1;
    uint64_t tag = 0;
    std::vector<char> payload;
    util::UniqueFd fd;  // invalid when none came
  };
  // Takes, without waiting, every held message whose tag has (tag & mask) == value, oldest first.
  std::vector<Message> takeMessages(uint64_t mask, uint64_t value);
  // Messages received so far: a poller compares it with what it saw last before taking any.
  uint64_t messagesReceived() const { return messagesReceived_.load(std::memory_order_acquire); }
  // Blocks until the thread has completed a whole accept-and-read pass begun after this call
  // (bounded: about 5 s at worst): what was sent to this endpoint before the call is then held.
  void syncPass();

 private:
  FdEndpoint(uint64_t jobKey, int rank, std::string dir, FdAddress address);
  void run();  // the endpoint's thread
  // Is anything listening at `rank`'s address? (A connection that sends nothing is ignored there.)
  [[nodiscard]] Status probe(int rank, bool* gone);
  // One frame (and `bytes` of payload, and fd when >= 0) to `to`.
  [[nodiscard]] Status sendFrame(const FdAddress& to, int toRank, int fd, uint64_t tag, const void* payload,
                                 size_t bytes, Clock::time_point deadline, const std::atomic<bool>* abort);

  const uint64_t jobKey_;
  const int rank_;
  const std::string dir_;
  const FdAddress address_;
  util::UniqueFd listen_;
  util::UniqueFd wake_;  // eventfd: wakes the thread for a pass or to stop
  std::thread thread_;
  std::atomic<bool> stop_{false};

  std::mutex mutex_;
  std::condition_variable changed_;  // an fd arrived or a pass completed
  std::map<std::pair<int, uint64_t>, util::UniqueFd> held_;  // (sender rank, tag) → fd
  std::vector<Message> messages_;                             // small messages, in arrival order
  std::atomic<uint64_t> messagesReceived_{0};
  uint64_t passes_ = 0;

  friend struct FdEndpointThread;  // the thread's helpers in fd_passing.cc
};

}  // namespace weft::transport::p2p
