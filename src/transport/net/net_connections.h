// The network transport of one communicator: connections with ranks on other hosts, as the GPU
// sees them, and the proxy thread that moves their bytes: weft's own over TCP (proxy/net_proxy.h),
// or one that drives a network plugin (proxy/plugin_proxy.h: comm->netPlugin, net_plugin.h).
//
// The kernels run the same Simple and LL code as for a peer in the same host; only the memory differs.
// A peer on another host has no memory this GPU can reach, so each end works in host memory of
// its own, mapped for its GPU:
//   - receive side (the usual layout, in the rank's host connection memory, as the SHM transport
//     keeps it): the staging slots and the tail are written by the proxy as data frames arrive;
//     the head, which the kernel would write into the sender's memory, goes to a line of this
//     rank's *image* memory instead, where the proxy picks it up and sends it back as a credit.
//   - send side: the kernel writes its slots and its tail into the image (standing in for the
//     receiver's memory); the proxy sends each step as it is published (its size from the head
//     line, device/abi.h kStepSizeWord) and writes the receiver's credits into the head line of the
//     rank's own connection memory, where the kernel waits for them.
// Simple and LL cross the network (LL lines are found by their flags: proxy/net_proxy.h), LL128 does
// not (core/comm_init.cc). The ring and tree connections are made at creation; the
// point-to-point-only ones (Simple, and small LL slots: conn_layout.h) on first use, as with the
// other transports (P2pConnections::offerReceives / acceptSends): the receiver makes their memory
// and declares them to its proxy before it sends its offer; the sender, holding the offer, makes
// its image slots and connects. With a plugin, each receive side's listen handle reaches its sender
// through the bootstrap: at creation for the connections made then, and just before the offer for
// those made on first use. Every rank checks at creation that all use the same network.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "proxy/net_proxy.h"
#include "proxy/plugin_proxy.h"
#include "transport/connection_plan.h"
#include "transport/p2p/conn_layout.h"
#include "transport/shm/mapped_shm.h"

struct ncclComm;
namespace weft::bootstrap { class Bootstrap; }

namespace weft::transport {

class NetConnections {
 public:
  // Collective over every rank of a communicator with comm->anyNet (listener addresses are
  // all-gathered, even by a rank without network connections). `local` is this rank's host
  // connection memory (laid out by `layout` for its own plan). Connects every network connection
  // of comm->connPlan but the point-to-point-only ones, and starts the proxy.
  [[nodiscard]] static Status create(ncclComm* comm, const ConnLayout& layout, shm::MappedShm* local,
                                     std::unique_ptr<NetConnections>* out);
  ~NetConnections();  // stops the proxy first: nothing touches the memory after

  // Device addresses of the send connection (channel, peer): its Simple slots, its LL slots (right
  // after them; null when LL is off) and its tail.
  char* sendSlots(int channel, int peer) const { return image_->devicePtr() + sendSlotsOffset_[index(channel, peer)]; }
  char* sendLLSlots(int channel, int peer) const {
    return llStepBytes_ != 0 ? sendSlots(channel, peer) + (size_t)dev::kSteps * stepBytes_ : nullptr;
  }
  volatile uint64_t* sendTail(int channel, int peer) const;
  // Device address of the head of the receive connection (channel, peer).
  volatile uint64_t* recvHead(int channel, int peer) const;
  int connections() const { return nSends_ + nRecvs_; }

  // First use, receiver side: host memory for the point-to-point-only connections from `sender`
  // (the channels receiverPlan (this rank's) lists, each buffer at ConnLayout::p2pOnlyBuffer, with
  // LL slots where the layout has them), declared to the proxy. *deviceBase: where the GPU sees
  // it. Never waits.
  [[nodiscard]] Status expectP2pOnly(const ConnectionPlan& receiverPlan, int sender, char** deviceBase);
  // First use, sender side (after the receiver's offer): image slots for the point-to-point-only
  // connections to `receiver`, laid out as the receiver's (receiverPlan: the receiver's plan),
  // connected through the proxy. *deviceBase: where the GPU sees them.
  [[nodiscard]] Status connectP2pOnly(const ConnectionPlan& receiverPlan, int receiver, char** deviceBase);
  // A launch is on its way: an idle proxy looks at the counters again at once (net_proxy.h).
  void wake();

 private:
  NetConnections() = default;
  size_t index(int channel, int peer) const { return (size_t)channel * layout_.nRanks + peer; }
  // The proxy's view of connection (channel, peer), its slots at `slots` and `llSlots` (host
  // addresses; llSlots null: Simple only), LL steps of llStepBytes.
  proxy::NetSendSide sendSide(int channel, int peer, char* slots, char* llSlots, uint64_t llStepBytes) const;
  proxy::NetRecvSide recvSide(int channel, int peer, char* slots, char* llSlots, uint64_t llStepBytes) const;
  // A point-to-point-only connection's buffer at `buffer` (host address): the proxy's view of it.
  proxy::NetSendSide p2pOnlySendSide(int channel, int peer, char* buffer) const;
  proxy::NetRecvSide p2pOnlyRecvSide(int channel, int peer, char* buffer) const;
  [[nodiscard]] Status makeHostMemory(const char* kind, int peer, size_t bytes, std::unique_ptr<shm::MappedShm>* out);
  // The socket proxy's or the plugin proxy's setup of the connections made at creation.
  [[nodiscard]] Status startSocketProxy(ncclComm* comm, const proxy::NetProxyConfig& cfg,
                                        const std::vector<proxy::NetSendSide>& sends,
                                        const std::vector<proxy::NetRecvSide>& recvs);
  [[nodiscard]] Status startPluginProxy(ncclComm* comm, const proxy::NetProxyConfig& cfg,
                                        const std::vector<proxy::NetSendSide>& sends,
                                        const std::vector<proxy::NetRecvSide>& recvs);
  // Plugin: the listen infos of `recvs` to their sender `peer`, and those of `sends` from `peer`.
  [[nodiscard]] Status sendInfos(int peer, int tag, const std::vector<proxy::PluginConnectInfo>& infos);
  [[nodiscard]] Status recvInfos(int peer, int tag, const std::vector<proxy::NetSendSide>& sends,
                                 std::vector<proxy::PluginConnectInfo>* infos);

  ConnLayout layout_;
  int rank_ = -1;
  uint64_t commHash_ = 0;
  uint64_t stepBytes_ = 0;
  uint64_t llStepBytes_ = 0;
  shm::MappedShm* local_ = nullptr;  // the rank's host connection memory (P2pConnections owns it)
  std::unique_ptr<shm::MappedShm> image_;
  // Per peer: the slots of the point-to-point-only connections made on first use, received from
  // it and sent to it (destroyed after the proxy, which reads and writes them).
  std::vector<std::unique_ptr<shm::MappedShm>> firstUseRecv_, firstUseSend_;
  std::vector<size_t> sendSlotsOffset_;  // per (channel, peer): where its send slots start in image_
  int nSends_ = 0, nRecvs_ = 0;
  bootstrap::Bootstrap* bootstrap_ = nullptr;
  std::vector<std::string> peerNames_;  // "rank 3 (pid 77 on node-b)" by rank, for messages
  std::string proxyText_;               // the proxy, for the log
  std::unique_ptr<proxy::NetProxy> proxy_;  // one of the two
  std::unique_ptr<proxy::PluginProxy> pluginProxy_;
};

}  // namespace weft::transport
