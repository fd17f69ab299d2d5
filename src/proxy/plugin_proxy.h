// The network proxy over a network plugin (transport/net/net_plugin.h): one host thread per
// communicator, as the socket proxy (net_proxy.h), with the same view of the GPU's connections
// (NetSendSide / NetRecvSide: slots and counters in host memory mapped for the kernels), but each
// step travels as one plugin message, so that a plugin for InfiniBand, EFA or another fabric can
// carry weft's traffic.
//
// Per connection (channel c, sender -> receiver) one plugin connection: the receiver listens, its
// handle reaches the sender through weft's bootstrap (PluginConnectInfo, checked), the sender
// connects and the receiver's proxy accepts. Every message is matched in order by one receive of
// the same tag (the channel), posted into the Simple slot of its step:
//   send proxy: step s goes once the GPU has published it: a Simple step (its size word names it,
//               the tail is past it) straight from its slot, padded to 16 bytes; an LL step (its
//               size word has kLLSizeBit, and all its lines carry the step's flag) as its lines
//               copied out, then an 8-byte trailer {kLinesMagic, step}. head = the sends completed:
//               once the plugin is done with a send, the GPU may rewrite its slot.
//   recv proxy: posts the receive of step s once the receiving GPU has consumed step s - kSteps
//               (its slot is free), so a message only ever lands in a free slot; on completion the
//               size tells the kind: a multiple of 16 is a Simple step (tail = s + 1), 8 more than
//               one is LL lines (trailer and flags checked, then stored into the LL slot in 8-byte
//               words, as the socket proxy does), 12 bytes exactly is a bye or fail notice
//               (net_wire.h kByeMagic / kFailMagic, then the step and the rank named). Anything
//               else fails the connection.
// So the plugin's own flow control (rendezvous, or socket buffers) stands between the two GPUs,
// as NCCL's proxy relies on it. Failures: a plugin call that fails, or a malformed message, fails
// the communicator (cfg.onFailure, one WARN naming the peer and channel); the proxy then tries to
// tell every peer it sends to (a fail notice) and closes its connections. An orderly destroy sends
// what the kernels published, then a bye on every send connection, so that receivers stay quiet.
// Abort closes everything without a word.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "proxy/net_proxy.h"
#include "transport/net/net_plugin.h"

namespace weft::proxy {

constexpr uint32_t kPluginInfoMagic = 0x49504e57;  // "WNPI"

// What a receiving rank gives the sender of one connection (through the bootstrap).
struct PluginConnectInfo {
  uint32_t magic;
  int32_t receiver;
  int32_t sender;
  int32_t channel;
  uint64_t jobKey;
  uint64_t stepBytes;    // the receiver's Simple slot size: both ends must agree
  uint32_t llStepBytes;  // LL slot size (0: no LL); both ends must agree
  uint32_t reserved;     // zero
  char handle[netabi::kHandleBytes];
};
static_assert(sizeof(PluginConnectInfo) == 40 + netabi::kHandleBytes, "PluginConnectInfo is exchanged");

// The info `from` (a rank's description) sent for send side `side` of rank `me`: magic, job key,
// ranks, channel and slot sizes. Failure: ncclRemoteError, *why starting with `from`.
[[nodiscard]] Status checkPluginConnectInfo(const PluginConnectInfo& info, const NetSendSide& side, uint64_t jobKey,
                                            int me, const char* from, std::string* why);

class PluginProxy {
 public:
  // `device`: the plugin's device (NIC) this rank uses.
  [[nodiscard]] static Status create(const NetProxyConfig& cfg, const transport::NetPlugin* plugin, int device,
                                     std::unique_ptr<PluginProxy>* out);
  // Stops the thread once what the kernels published is sent and the byes are out (a few seconds
  // at most; at once after an abort or failure), then closes the connections.
  ~PluginProxy();
  PluginProxy(const PluginProxy&) = delete;
  PluginProxy& operator=(const PluginProxy&) = delete;

  // Listens for each receive side; (*infos)[i] is what recvs[i]'s sender needs. Before start(),
  // start() accepts them; after it (connections made on first use), the progress thread does.
  [[nodiscard]] Status listen(const std::vector<NetRecvSide>& recvs, std::vector<PluginConnectInfo>* infos);
  // Collective with the peers: connects every send side (infos[i] from sends[i]'s receiver, checked)
  // while accepting every receive side listened for, within cfg.setupTimeoutSec and giving up on
  // abort (the error names what is missing); then starts the progress thread. Call once.
  [[nodiscard]] Status start(const std::vector<NetSendSide>& sends, const std::vector<PluginConnectInfo>& infos);
  // After start(): connects these send sides (their receivers listen already) and hands them to
  // the progress thread. Fails at once once the proxy has failed or stopped.
  [[nodiscard]] Status addSends(const std::vector<NetSendSide>& sends, const std::vector<PluginConnectInfo>& infos);

  void wake();  // a launch is coming: stop idling
  bool idle() const { return sleeping_.load(std::memory_order_relaxed); }
  uint64_t stepsSent() const { return stepsSent_.load(std::memory_order_acquire); }        // Simple
  uint64_t stepsReceived() const { return stepsReceived_.load(std::memory_order_acquire); }  // Simple
  uint64_t linesReceived() const { return linesReceived_.load(std::memory_order_acquire); }  // LL lines

 private:
  struct SendConn;
  struct RecvConn;

  PluginProxy(const NetProxyConfig& cfg, const transport::NetPlugin* plugin, int device);
  std::string peerName(int peer) const;
  std::string describe(int channel, bool send, int peer) const;
  Status makeSends(const std::vector<NetSendSide>& sends, const std::vector<PluginConnectInfo>& infos,
                   std::vector<std::unique_ptr<SendConn>>* out) const;
  // Calls connect/accept until every one given is connected, or the deadline/abort.
  Status connectAll(const std::vector<SendConn*>& sends, const std::vector<RecvConn*>& recvs);
  Status registerSend(SendConn& c) const;
  Status registerRecv(RecvConn& c) const;
  void adoptIncoming();

  void run();
  bool progressSend(SendConn& c, bool* moved);
  bool postReady(SendConn& c, bool* moved);
  bool llReady(SendConn& c, uint64_t step, uint64_t bytes);
  bool completeSends(SendConn& c, bool* moved);
  bool progressRecv(RecvConn& c, bool* moved);
  bool deliver(RecvConn& c, uint64_t step, size_t bytes);
  bool flushed() const;
  void sendNotices(uint32_t magic, int culprit);  // bye or fail notices, waited for a short while
  bool fail(Status code, int culprit, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
  void closeSend(SendConn& c) const;  // deregisters and closes; safe on one never connected
  void closeAll(bool incomingToo);

  NetProxyConfig cfg_;
  const transport::NetPlugin* plugin_;
  int device_;
  std::vector<std::unique_ptr<SendConn>> sends_;
  std::vector<std::unique_ptr<RecvConn>> recvs_;
  std::mutex mutex_;  // guards the incoming lists, filled by the communicator's threads
  std::vector<std::unique_ptr<SendConn>> incomingSends_;
  std::vector<std::unique_ptr<RecvConn>> incomingRecvs_;
  std::atomic<bool> incoming_{false};
  bool started_ = false;
  std::atomic<bool> failed_{false};
  bool orderly_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  bootstrap::Fd wakeFd_;
  std::atomic<uint64_t> stepsSent_{0}, stepsReceived_{0}, linesReceived_{0};
  std::thread thread_;
};

}  // namespace weft::proxy
