// The network transport of one communicator: connections with ranks on other hosts, as the GPU
// sees them, and the proxy thread (proxy/net_proxy.h) that moves their bytes over TCP.
//
// The kernels run the same Simple code as for a peer in the same host; only the memory differs.
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
// Only Simple crosses the network: communicators with network peers run Simple alone
// (core/comm_init.cc), and their point-to-point connections are all made at creation.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "transport/connection_plan.h"
#include "transport/p2p/conn_layout.h"
#include "transport/shm/mapped_shm.h"

struct ncclComm;

namespace weft::proxy {
class NetProxy;
}

namespace weft::transport {

class NetConnections {
 public:
  // Collective over every rank of a communicator with comm->anyNet (listener addresses are
  // all-gathered, even by a rank without network connections). `local` is this rank's host
  // connection memory (laid out by `layout` for its own plan). Connects every network connection
  // of comm->connPlan and starts the proxy.
  [[nodiscard]] static Status create(ncclComm* comm, const ConnLayout& layout, shm::MappedShm* local,
                                     std::unique_ptr<NetConnections>* out);
  ~NetConnections();  // stops the proxy first: nothing touches the memory after

  // Device addresses of the send connection (channel, peer): its Simple slots and its tail.
  char* sendSlots(int channel, int peer) const { return image_->devicePtr() + sendSlotsOffset_[index(channel, peer)]; }
  volatile uint64_t* sendTail(int channel, int peer) const;
  // Device address of the head of the receive connection (channel, peer).
  volatile uint64_t* recvHead(int channel, int peer) const;
  int connections() const { return nSends_ + nRecvs_; }
  // A launch is on its way: an idle proxy looks at the counters again at once (net_proxy.h).
  void wake();

 private:
  NetConnections() = default;
  size_t index(int channel, int peer) const { return (size_t)channel * layout_.nRanks + peer; }

  ConnLayout layout_;
  std::unique_ptr<shm::MappedShm> image_;
  std::vector<size_t> sendSlotsOffset_;  // per (channel, peer): where its send slots start in image_
  int nSends_ = 0, nRecvs_ = 0;
  std::unique_ptr<proxy::NetProxy> proxy_;
};

}  // namespace weft::transport
