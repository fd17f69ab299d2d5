// Tagged, framed messages between the ranks of one bootstrap, over TCP.
//
// Each rank listens on its own socket. The first send to a peer connects to the peer's listen
// address and opens with a PeerHello naming the sender; the connection then carries only that
// direction (sender -> receiver), so each pair uses at most two connections and a receiver never
// has to write on a socket it reads. Everything that arrives is read by one poll()-driven loop
// (progress) into per-peer inboxes, keyed by (frame type, tag) and kept in arrival order, so
// unexpected messages are queued, not lost, and a blocked send keeps draining incoming data
// (two ranks sending large messages to each other cannot deadlock).
//
// Every wait polls the abort flag and stops at its deadline. Errors are decided and logged here,
// once, naming the peer rank, its address and the operation.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/frame_reader.h"
#include "bootstrap/limits.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "core/status.h"
#include "util/deadline.h"

namespace weft::bootstrap {

class Messenger {
 public:
  Messenger(int rank, int nRanks, uint64_t jobKey, const std::atomic<bool>* abort);
  ~Messenger();
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;

  // Opens the listen socket on bindAddress (port 0: the kernel picks one).
  [[nodiscard]] Status listen(const SocketAddress& bindAddress);
  const SocketAddress& listenAddress() const { return listenAddress_; }
  int listenFd() const { return listener_.get(); }

  void setPeerAddress(int peer, const SocketAddress& address) { peers_[peer].address = address; }
  // The flag every wait polls (null: none; waits then end at their deadline or a peer's failure).
  void setAbortFlag(const std::atomic<bool>* abort) { abort_ = abort; }
  const std::atomic<bool>* abortFlag() const { return abort_; }
  // Ends every wait within a poll slice, whatever the abort flag (the owner is going away); for good.
  void close() { closing_.store(true); }
  bool closing() const { return closing_.load(); }
  // Reads what has arrived, then forgets the failure notices peers have sent so far, so that an
  // operation among the ranks still alive can start afresh after an earlier one failed.
  void forgetFailureNotices();
  const SocketAddress& peerAddress(int peer) const { return peers_[peer].address; }
  std::string peerText(int peer) const;  // "rank 3 (10.0.0.4:41234)"

  // One message of `bytes` (any size up to wire::kMaxMessageBytes) to peer, matched by the
  // receiver on (type, tag). `op` names the operation for error messages ("allgather").
  [[nodiscard]] Status send(int peer, wire::FrameType type, int tag, const void* data, size_t bytes,
                            const util::Deadline& deadline, const char* op);
  // The oldest queued message from peer with this (type, tag); its size must equal `bytes`.
  [[nodiscard]] Status recv(int peer, wire::FrameType type, int tag, void* data, size_t bytes,
                            const util::Deadline& deadline, const char* op);

  // Best effort, bounded by a short deadline, never logs a warning: tells peer that this rank gave
  // up, so that it fails at once with the root cause instead of timing out.
  void notifyFailure(int peer, const std::string& text);

  // The text of the latest failure this messenger decided (logged as WARN), and the first failure
  // a peer reported to it (the root cause when failures cascade along the ring).
  const std::string& failureText() const { return failureText_; }
  // Peers with a live connection to or from this rank: alive a moment ago and cheap to notify.
  std::vector<int> connectedPeers() const;
  // Messages (not frames) this rank sent and received so far, and their bytes (payload only).
  struct Traffic {
    uint64_t messagesSent = 0, bytesSent = 0, messagesReceived = 0, bytesReceived = 0;
  };
  const Traffic& traffic() const { return traffic_; }
  const std::string& remoteFailure() const { return remoteFailure_; }

  // Waits up to timeoutMs for activity and handles it: accepts connections, reads frames. While a
  // send waits for room it passes its socket as extraFd (events in extraEvents, result in
  // *extraRevents).
  [[nodiscard]] Status progress(int timeoutMs, int extraFd = -1, short extraEvents = 0, short* extraRevents = nullptr);

  // Decides a failure: formats "bootstrap (rank r of n): <text>", logs it as WARN, remembers it,
  // returns code.
  Status fail(Status code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

 private:
  struct Message {
    uint16_t type;
    int32_t tag;
    std::vector<char> data;
  };
  struct Incoming;
  struct Peer {
    SocketAddress address;
    Fd out;                // this rank -> peer
    bool outBroken = false;
    std::string outBrokenWhy;
    std::chrono::steady_clock::time_point brokenAt{};  // when outBroken was set
    Incoming* in = nullptr;  // peer -> this rank
    bool everConnected = false;
    bool inClosed = false;
    std::string inClosedWhy;
    bool failed = false;  // it sent a failure notice
    std::string failedText;
    std::vector<Message> inbox;
  };

  void markOutBroken(int peer, const std::string& why);
  static bool hungUp(int fd);
  Status watchSilentPeer(int peer, const util::Deadline& deadline, const char* op, int* watchFd);
  void acceptAll();
  void drain(Incoming& in);
  bool onFrame(Incoming& in);
  bool onPeerHello(Incoming& in);
  void onGone(Incoming& in, const std::string& why);
  void expireStrangers();
  bool takeMessage(int peer, uint16_t type, int tag, Message* out);
  Status ensureConnected(int peer, const util::Deadline& deadline, const char* op);
  Status writeFrame(int peer, const wire::FrameHeader& h, const void* payload, uint32_t length,
                    const util::Deadline& deadline, const char* op);
  Status failPeerGone(int peer, Status code, const std::string& what, const char* op);
  Status waitChecks(int peer, const util::Deadline& deadline, const char* op, const char* waitingFor);
  bool quietSend(int peer, wire::FrameType type, const void* payload, uint32_t length);

  int rank_;
  int nRanks_;
  uint64_t jobKey_;
  const std::atomic<bool>* abort_;
  std::atomic<bool> closing_{false};
  Fd listener_;
  SocketAddress listenAddress_;
  std::vector<Peer> peers_;
  std::vector<std::unique_ptr<Incoming>> incoming_;
  RejectLog rejects_;
  Traffic traffic_;
  std::string failureText_;
  std::string remoteFailure_;
  int remoteFailurePeer_ = -1;
};

}  // namespace weft::bootstrap
