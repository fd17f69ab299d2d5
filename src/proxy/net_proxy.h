// The network proxy: one host thread per communicator that moves the Simple and LL protocols' steps
// between ranks on different hosts over TCP, for GPU kernels that only see host memory.
//
// Per connection (channel c, sender -> receiver) each side has kSteps slots of stepBytes in pinned
// host memory and two 64-bit counters that start at 0 and only grow:
//   sender GPU:   waits for head + kSteps > s, writes slot s % kSteps and stepSizes[s % kSteps], then
//                 publishes gpuTail = s + 1 (release).
//   send proxy:   for each new step sends {DataHeader, payload}; stores each credit it receives into head.
//   recv proxy:   receives the payload straight into slot s % kSteps, then publishes tail = s + 1.
//   receiver GPU: waits for tail > s, reads the slot, publishes gpuHead = s + 1.
//   recv proxy:   sends a credit whenever gpuHead grew.
// LL steps share the counters but publish no tail: the sender GPU writes 16-byte lines that carry
// the step's flag (device/work_math.h llFlag) into LL slot s % kSteps; the send proxy sends each run
// of flagged lines as it appears (in line order: a step's lines are a prefix of its slot), the recv
// proxy checks their flags and stores them in 8-byte words into the receiver's LL slot, where the
// GPU waits for the flags; head and credits work as for Simple. The tail counts Simple steps only:
// a Simple step's size word carries its step number (device/abi.h stepSizeWord), which is how the
// send proxy tells the steps below the tail apart.
// Flow control is end to end (the sender GPU waits for the receiver GPU), so a step that arrives
// always lands in a free slot and a send slot is never rewritten before the proxy sent it; the proxy
// checks both rules rather than trusting them.
//
// Setup: NetProxy::listen opens the listen socket, desc() is all-gathered by the caller, then start()
// connects every send side to its peer (a Hello, echoed back to accept), accepts one connection per
// receive side and starts the progress thread. Connections made on first use come later: the
// receiving rank declares them (expectReceives) before it tells the sender, the sender connects
// (addSends), and the receiver's progress thread, which keeps listening, accepts them.
// Failures after start reach cfg.onFailure once, after one WARN naming this rank, the peer, the
// channel and the direction; the thread then sends its peers a fail frame naming the rank that
// failed first (where a connection is between frames), stops, and shuts every connection down, so
// that the peers notice at once and name the cause. Abort shuts them down without a word.
// An orderly destroy sends each peer a bye where nothing is owed to it, so that it stays quiet.
// The slots and counters given to start() must stay valid until the NetProxy is destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <poll.h>

#include "bootstrap/socket.h"
#include "core/status.h"
#include "proxy/net_wire.h"
#include "util/deadline.h"

namespace weft::proxy {

struct NetSendSide {  // this rank -> peer on channel
  int channel = -1, peer = -1;
  const volatile uint64_t* gpuTail = nullptr;    // GPU: step + 1 after writing the slot
  const volatile uint64_t* stepSizes = nullptr;  // [kSteps]: bytes of step s at [s % kSteps], written before the tail
  const char* slots = nullptr;                   // kSteps slots of stepBytes bytes
  volatile uint64_t* head = nullptr;             // proxy: the receiver's consumption counter
  uint64_t stepBytes = 0;
  // LL: kSteps slots of llStepBytes bytes (zeroed before the GPU's first step), or none (0). The
  // proxy rewrites a slot's flags once every 2^31 steps, as the receiving GPU does (llWipeAfter).
  char* llSlots = nullptr;
  uint64_t llStepBytes = 0;
};

struct NetRecvSide {  // peer -> this rank on channel
  int channel = -1, peer = -1;
  char* slots = nullptr;                       // kSteps slots of stepBytes bytes
  volatile uint64_t* tail = nullptr;           // proxy: step + 1 once the step's bytes are in
  const volatile uint64_t* gpuHead = nullptr;  // GPU: step + 1 once consumed
  uint64_t stepBytes = 0;
  char* llSlots = nullptr;  // LL: kSteps slots of llStepBytes bytes, or none (0); as the sender's
  uint64_t llStepBytes = 0;
};

struct NetProxyConfig {
  uint64_t jobKey = 0;
  int rank = -1;
  int nRanks = 0;
  std::vector<std::string> peerNames;  // per rank, for messages, e.g. "rank 3 (pid 77 on node-b)"
  const std::atomic<bool>* abortRequested = nullptr;  // stop quietly when set
  // Called once, from the proxy thread, when a connection fails, after the WARN: ncclRemoteError for
  // a peer that closed/reset or sent a malformed frame, ncclSystemError for local socket errors,
  // ncclInternalError for counters the local GPU side got wrong. The proxy then stops moving data.
  std::function<void(ncclResult_t)> onFailure;
  int64_t setupTimeoutSec = 300;  // <= 0: wait forever
};

class NetProxy {
 public:
  // Opens a listening socket on `bindAddress` (port 0: any) for the peers to connect to. Bind to the
  // address peers should use: desc() publishes the bound address as it is.
  [[nodiscard]] static Status listen(const NetProxyConfig& cfg, const bootstrap::SocketAddress& bindAddress,
                                     std::unique_ptr<NetProxy>* out);
  // Stops the thread once the steps the kernels published are sent (at most a few seconds; at
  // once after an abort or failure), then closes the sockets.
  ~NetProxy();
  NetProxy(const NetProxy&) = delete;
  NetProxy& operator=(const NetProxy&) = delete;

  ListenerDesc desc() const { return desc_; }  // to all-gather

  // Collective with the peers named in sends/recvs: connects every send side to its peer's listener
  // (peers indexed by rank; each used one is checked first), sends its Hello and waits for the echo;
  // accepts one connection per receive side and echoes its checked Hello; all within
  // cfg.setupTimeoutSec and giving up on abortRequested (the error names the connections still
  // missing). Hellos that do not match an expected, unconnected receive side are refused (WARN,
  // connection closed) and the wait goes on. Then starts the progress thread, which keeps the
  // listener for connections made on first use. Call once.
  [[nodiscard]] Status start(const std::vector<NetSendSide>& sends, const std::vector<NetRecvSide>& recvs,
                             const std::vector<ListenerDesc>& peers);

  // After start(), for connections made on first use: receive sides that their peers will connect
  // later. Never waits. Call it before the peer can learn that it may connect (its connect follows
  // a message from this rank), so that every hello finds its side.
  [[nodiscard]] Status expectReceives(const std::vector<NetRecvSide>& recvs);
  // After start(): connects these send sides to their peers' listeners (which expect them), sends
  // the hellos and waits for the echoes, within cfg.setupTimeoutSec and giving up on abort; then
  // hands them to the progress thread. Fails at once once the proxy has failed or stopped.
  [[nodiscard]] Status addSends(const std::vector<NetSendSide>& sends);

  // Work is coming (a launch of this communicator): a proxy that idled into its slow polling
  // (kIdleSlowMs without traffic) looks at the GPU's counters again at once. Cheap when it is awake.
  void wake();
  bool idle() const { return sleeping_.load(std::memory_order_relaxed); }  // for tests

  // Simple steps moved so far (all connections), and LL lines received, for tests and logs; each
  // counted once in place, so that a thread that reads a count also sees what it counts.
  uint64_t stepsSent() const { return stepsSent_.load(std::memory_order_acquire); }
  uint64_t stepsReceived() const { return stepsReceived_.load(std::memory_order_acquire); }
  uint64_t linesReceived() const { return linesReceived_.load(std::memory_order_acquire); }  // LL lines

 private:
  struct SendConn;
  struct RecvConn;
  struct Stranger;

  explicit NetProxy(const NetProxyConfig& cfg);
  std::string peerName(int peer) const;
  std::string describe(int channel, bool send, int peer) const;
  // Sides well formed and never declared before (in this call or an earlier one).
  Status checkSides(const std::vector<NetSendSide>& sends, const std::vector<NetRecvSide>& recvs);
  Status connectOne(SendConn& c, const util::Deadline& deadline);
  Status connectAndConfirm(SendConn& c, const util::Deadline& deadline);  // connectOne, then the echo
  Status checkRunning(const char* what) const;  // for the calls after start()
  Status acceptAndConfirm(const util::Deadline& deadline);
  void acceptPending();
  bool readHello(Stranger& s);
  Status admit(Stranger& s, const util::Deadline& deadline);
  Status readEcho(SendConn& c);
  std::string missingText() const;
  void adoptIncoming();  // progress thread: takes what expectReceives and addSends queued
  void welcomeStrangers(bool* changed);  // progress thread: hellos of connections made on first use

  void run();
  void buildPollSet(std::vector<pollfd>* fds) const;
  bool progressSend(SendConn& c, short revents, bool* moved);
  bool prepareSteps(SendConn& c, uint64_t tail);
  bool queueFrame(SendConn& c, const DataHeader& hdr, const char* payload);
  bool sendFrames(SendConn& c, bool* moved);
  bool nothingOwed(const SendConn& c) const;
  // LL (net_proxy_lines.cc): queue the runs of lines that appeared in the credit window; whether
  // any are there to queue; rewrite a slot's flags (before the credit that frees it for step + kSteps).
  struct NewLines;
  NewLines newLines(const SendConn& c, uint64_t step) const;  // lines of `step` to queue now
  bool scanLines(SendConn& c);
  bool linesPending(const SendConn& c) const;
  void wipeLines(SendConn& c, uint64_t step);
  bool landLines(RecvConn& c);  // the payload in c.lines: checked, then into its slot
  bool readCredits(SendConn& c, bool* moved);
  bool progressRecv(RecvConn& c, short revents, bool* moved);
  bool readData(RecvConn& c, bool* moved);
  bool sendCredit(RecvConn& c, bool* moved);
  // WARN, tell the peers (naming `culprit`, the rank whose connection failed or this one), stop,
  // onFailure; returns false.
  bool fail(Status code, int culprit, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
  bool failIo(int peer, const std::string& what, const char* doing, int err);
  bool failAfterPeer(int peer, uint64_t culprit, const std::string& what);  // the peer sent a fail frame
  void announceFailure(int culprit);
  void shutdownAll();
  void sayGoodbye();
  bool flushed() const;  // every step the kernels published has gone out
  void keepAlive(int fd) const;

  NetProxyConfig cfg_;
  bootstrap::Fd listener_;
  ListenerDesc desc_{};
  std::vector<std::unique_ptr<SendConn>> sends_;
  std::vector<std::unique_ptr<RecvConn>> recvs_;
  std::unordered_map<int64_t, RecvConn*> recvByKey_;  // by (channel, peer): where a hello belongs
  std::vector<Stranger> strangers_;   // accepted, hello not yet complete
  std::vector<ListenerDesc> peers_;   // from start(): where addSends connects
  // Sides declared so far (checkSides), and those declared after start() that the progress thread
  // has not yet taken (adoptIncoming): written by the communicator's threads, under mutex_.
  std::mutex mutex_;
  std::unordered_set<int64_t> sendKeys_, recvKeys_;
  std::vector<std::unique_ptr<SendConn>> incomingSends_;
  std::vector<std::unique_ptr<RecvConn>> incomingRecvs_;
  std::atomic<bool> incoming_{false};
  bool started_ = false;
  std::atomic<bool> failed_{false};  // the progress thread stopped on a failure
  bool orderly_ = false;  // the thread stopped because the destructor asked: peers get a bye
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};  // the thread waits in poll() between looks at the counters
  bootstrap::Fd wakeFd_;               // an eventfd in that poll: wake() writes it
  std::atomic<uint64_t> stepsSent_{0};
  std::atomic<uint64_t> stepsReceived_{0};
  std::atomic<uint64_t> linesReceived_{0};
  std::thread thread_;
};

}  // namespace weft::proxy
