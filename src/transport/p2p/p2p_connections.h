// The P2P transport of one communicator: one shareable allocation per rank holding its counters
// and the buffers of its full receive connections (conn_layout.h), mapped by every peer it talks
// to; from those mappings, the DevPeer tables the kernels use (host copies and device copies).
// Peers in other processes map it through cuMem file descriptors (or legacy CUDA IPC handles);
// peers in this process map it the same way when it is cuMem memory, so that each rank's memory
// outlives every mapping of it regardless of destruction order.
//
// Point-to-point-only connections (for send/receive between ranks that are no ring neighbours:
// connection_plan.h) get their buffers on first use, as NCCL connects on first use
// (NCCL_RUNTIME_CONNECT=1, the default): at the end of the first group whose point-to-point work
// between two ranks runs on them, the receiver allocates one buffer for all of the sender's
// point-to-point-only channels and offers it (the descriptor through the bootstrap, the fd
// through the fd endpoint); the sender maps it. Both
// ends plan the same channels for a transfer (enqueue/planner.h), so both reach that group end.
// The receiver never waits; the sender waits for the offer, within the setup deadline, giving up
// on abort. NCCL_RUNTIME_CONNECT=0 makes every one of them at creation.
//
// Peers reached through host shared memory (the SHM transport: ncclComm::shmPeers, for GPU pairs
// without peer-to-peer access) get the same connections, the same layout and the same kernels;
// only the memory differs: the counters and buffers of connections with them lie in a segment of
// /dev/shm per rank (transport/shm/mapped_shm.h), mapped into the GPUs' address space, instead of
// GPU memory. Registrations are never shared with them (zero-copy needs peer access).
//
// Peers on other hosts (the network transport: ncclComm::netPeers) get the same layout in this
// rank's host connection memory too; what the kernels would write into their memory goes to
// memory of this rank's that the proxy forwards from (transport/net/net_connections.h).
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "device/abi.h"
#include "runtime/gpu.h"
#include "runtime/ipc_mem.h"
#include "runtime/shareable_alloc.h"
#include "transport/p2p/conn_layout.h"
#include "transport/p2p/fd_passing.h"
#include "transport/p2p/reg_sharing.h"
#include "transport/net/net_connections.h"
#include "transport/shm/mapped_shm.h"

struct ncclComm;

namespace weft::transport {

class P2pConnections {
 public:
  // Collective: allocates, exchanges descriptors through the bootstrap, maps the peers' memory
  // and builds the device tables. Needs comm's rank, peers, rings, connPlan and stepBytes.
  [[nodiscard]] static Status create(ncclComm* comm, std::unique_ptr<P2pConnections>* out);
  ~P2pConnections();

  // DevPeer of every rank on channel c (entries without connections are zero), on the host and
  // in device memory (what dev::DevChannel::peers points to).
  const std::vector<dev::DevPeer>& devPeers(int channel) const { return devPeers_[channel]; }
  dev::DevPeer* deviceTable(int channel) const { return deviceTables_[channel]; }
  size_t bytesPerRank() const { return local_.bytes(); }

  // Does point-to-point work on (channel, peer) need a point-to-point-only connection that is not
  // made yet? Cheap: false at once when every such connection is made (or there are none).
  bool sendNeedsConnect(int channel, int peer) const {
    return pending_ > 0 && sendP2pOnly_[channel][peer] && !sendReady_[peer];
  }
  bool recvNeedsConnect(int channel, int peer) const {
    return pending_ > 0 && recvP2pOnly_[channel][peer] && !recvReady_[peer];
  }
  bool anyPending() const { return pending_ > 0; }
  // Before a launch: the network proxy, if any, stops idling (NetConnections::wake).
  void wakeNetwork() {
    if (netConns_) netConns_->wake();
  }
  // This process's fd endpoint (fd_passing.h); null with one rank.
  p2p::FdEndpoint* endpoint() const { return endpoint_.get(); }
  // Zero-copy sharing of registered buffers with the peers (reg_sharing.h); null with one rank.
  p2p::RegSharing* sharing() const { return sharing_.get(); }
  // First use, receiver side: allocates the buffers of each sender's point-to-point-only
  // connections to this rank and offers them to it. Never waits for a peer.
  [[nodiscard]] Status offerReceives(ncclComm* comm, const std::vector<int>& senders);
  // First use, sender side: maps each receiver's offer. Call after offerReceives on every
  // communicator of the group, since the offer may come from a rank that this thread drives.
  [[nodiscard]] Status acceptSends(ncclComm* comm, const std::vector<int>& receivers);

 private:
  P2pConnections() = default;
  [[nodiscard]] Status mapPeers(ncclComm* comm, const std::vector<runtime::IpcMemDesc>& descs);
  [[nodiscard]] Status mapShmPeers(ncclComm* comm, const std::vector<shm::ShmDesc>& descs);
  bool viaShm(int p) const { return p >= 0 && p < (int)shm_.size() && shm_[p]; }
  bool viaNet(int p) const { return p >= 0 && p < (int)net_.size() && net_[p]; }
  // Where this rank's connection memory for peer p is, as its GPU sees it.
  char* localFor(int p) const;
  void buildDevPeers(const ncclComm* comm);
  [[nodiscard]] Status makeDeviceTables();
  // Points a point-to-point-only connection's protocol buffers into its staging buffer.
  void setP2pOnlyBuffers(char* buffer, dev::ConnInfo* conn) const;
  // devPeers_[channel][peer]'s buffers of one direction to the device table (only those fields).
  [[nodiscard]] Status uploadP2pBuffers(int channel, int peer, bool send);
  // INFO: how many receive parts landed directly in registered buffers (the kernels' counts).
  void reportDirectReceives() const;

  ConnLayout layout_;
  uint64_t jobKey_ = 0;
  int rank_ = -1;
  bool registered_ = false;
  std::unique_ptr<p2p::FdEndpoint> endpoint_;
  std::unique_ptr<p2p::RegSharing> sharing_;
  runtime::ShareableAlloc local_;
  std::vector<runtime::ImportedMem> imported_;  // per rank (invalid when not mapped)
  std::vector<char*> peerBase_;                 // per rank: where its memory is visible to us
  std::vector<std::vector<dev::DevPeer>> devPeers_;
  std::vector<dev::DevPeer*> deviceTables_;     // per channel, device memory

  // Point-to-point-only connections: [channel][peer] in each direction (the send side from the
  // peer's plan), which peers' are made, and how many pairs-and-directions are still to make.
  std::vector<std::vector<bool>> sendP2pOnly_, recvP2pOnly_;
  std::vector<bool> sendReady_, recvReady_;
  int pending_ = 0;
  std::vector<runtime::ShareableAlloc> p2pOnlyLocal_;  // per sender: our buffers for it
  std::vector<runtime::ImportedMem> p2pOnlyImported_;  // per receiver: its buffers for us
  runtime::Stream uploadStream_ = nullptr;             // device table updates

  // SHM transport: per rank, whether it is reached through host shared memory; this rank's
  // connection memory for those peers (laid out as local_) and each such peer's, mapped here; the
  // point-to-point-only buffers made on first use, per sender (ours) and per receiver (theirs).
  std::vector<bool> shm_;
  std::unique_ptr<shm::MappedShm> hostLocal_;
  std::vector<std::unique_ptr<shm::MappedShm>> hostPeers_;
  std::vector<std::unique_ptr<shm::MappedShm>> p2pOnlyHostLocal_, p2pOnlyHostImported_;

  // Network transport: per rank, whether it is on another host; its connections (which keep their
  // receive side in hostLocal_). Destroyed first: its proxy thread writes into hostLocal_.
  std::vector<bool> net_;
  std::unique_ptr<NetConnections> netConns_;
};

// Every rank this one has a connection with, in either direction, on any channel.
std::vector<bool> connectedPeers(const ConnectionPlan& plan);

}  // namespace weft::transport
