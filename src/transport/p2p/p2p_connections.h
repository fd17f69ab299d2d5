// The P2P transport of one communicator: one shareable allocation per rank holding its counters
// and receive buffers (conn_layout.h), mapped by every peer it talks to; from those mappings, the
// DevPeer tables the kernels use. Peers in other processes map it through cuMem file descriptors
// (or legacy CUDA IPC handles); peers in this process map it the same way when it is cuMem memory,
// so that each rank's memory outlives every mapping of it regardless of destruction order.
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "device/abi.h"
#include "runtime/ipc_mem.h"
#include "runtime/shareable_alloc.h"
#include "transport/p2p/conn_layout.h"
#include "transport/p2p/fd_passing.h"

struct ncclComm;

namespace weft::transport {

class P2pConnections {
 public:
  // Collective: allocates, exchanges descriptors through the bootstrap, maps the peers' memory
  // and builds the device tables. Needs comm's rank, peers, rings, connPlan and stepBytes.
  [[nodiscard]] static Status create(ncclComm* comm, std::unique_ptr<P2pConnections>* out);
  ~P2pConnections();

  // DevPeer of every rank on channel c (entries without connections are zero).
  const std::vector<dev::DevPeer>& devPeers(int channel) const { return devPeers_[channel]; }
  size_t bytesPerRank() const { return local_.bytes(); }

 private:
  P2pConnections() = default;
  [[nodiscard]] Status mapPeers(ncclComm* comm, const std::vector<runtime::IpcMemDesc>& descs);
  void buildDevPeers(const ncclComm* comm);

  ConnLayout layout_;
  uint64_t jobKey_ = 0;
  int rank_ = -1;
  bool registered_ = false;
  std::unique_ptr<p2p::FdEndpoint> endpoint_;
  runtime::ShareableAlloc local_;
  std::vector<runtime::ImportedMem> imported_;  // per rank (invalid when not mapped)
  std::vector<char*> peerBase_;                 // per rank: where its memory is visible to us
  std::vector<std::vector<dev::DevPeer>> devPeers_;
};

// Every rank this one has a connection with, in either direction, on any channel.
std::vector<bool> connectedPeers(const ConnectionPlan& plan);

}  // namespace weft::transport
