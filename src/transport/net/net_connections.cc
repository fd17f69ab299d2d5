#include "transport/net/net_connections.h"

#include <cstdio>
#include <utility>

#include "bootstrap/bootstrap.h"
#include "core/comm_init.h"
#include "core/communicator.h"
#include "core/log.h"
#include "core/param.h"
#include "core/peer_info.h"
#include "proxy/net_proxy.h"

namespace weft::transport {
namespace {

const param::IntParam kSetupTimeout{"NCCL_BOOTSTRAP_TIMEOUT", 300};

// The proxy's failure: the communicator fails as it does when a peer process dies (the proxy has
// logged what happened; that text becomes the communicator's last error), and its kernels stop.
void failFromProxy(ncclComm* comm, ncclResult_t code) {
  comm->setLastError(log::lastErrorOfThread());
  ncclResult_t none = ncclSuccess;
  comm->asyncError.compare_exchange_strong(none, code);
  core::requestAbort(comm);
}

}  // namespace

volatile uint64_t* NetConnections::sendTail(int channel, int peer) const {
  return (volatile uint64_t*)(image_->devicePtr() + layout_.counterBlock(channel, peer) + kTailOffset);
}

volatile uint64_t* NetConnections::recvHead(int channel, int peer) const {
  return (volatile uint64_t*)(image_->devicePtr() + layout_.counterBlock(channel, peer) + kHeadOffset);
}

void NetConnections::wake() {
  if (proxy_) proxy_->wake();
}

NetConnections::~NetConnections() {
  proxy_.reset();  // joins the thread before the image (and the caller's memory) can go
}

Status NetConnections::create(ncclComm* comm, const ConnLayout& layout, shm::MappedShm* local,
                              std::unique_ptr<NetConnections>* out) {
  if (local == nullptr) {  // P2pConnections makes it whenever a connected peer is on another host
    WEFT_WARN("rank %d: network connections without host connection memory", comm->rank);
    return ncclInternalError;
  }
  std::unique_ptr<NetConnections> self(new NetConnections());
  self->layout_ = layout;
  const ConnectionPlan& plan = comm->connPlan;
  const uint64_t stepBytes = (uint64_t)comm->protoStepBytes[dev::kProtoSimple];
  auto viaNet = [&](int p) { return p < (int)comm->netPeers.size() && comm->netPeers[p]; };

  // The image: a counter block per (channel, peer) as in the connection memory (the send tail and
  // the receive head of that pair), then the Simple slots of every network send connection.
  self->sendSlotsOffset_.assign((size_t)comm->nChannels * comm->nRanks, 0);
  size_t bytes = layout.buffersStart();
  for (int c = 0; c < comm->nChannels; ++c) {
    for (int p = 0; p < comm->nRanks; ++p) {
      if (!viaNet(p)) continue;
      if (plan.sendOn[c][p]) {
        self->sendSlotsOffset_[self->index(c, p)] = bytes;
        bytes += (size_t)dev::kSteps * stepBytes;
        self->nSends_++;
      }
      if (plan.recvOn[c][p]) self->nRecvs_++;
    }
  }
  char tag[40];
  snprintf(tag, sizeof(tag), "%08llx-r%d-net", (unsigned long long)(comm->commHash & 0xffffffffu), comm->rank);
  WEFT_TRY(shm::MappedShm::create(tag, bytes, &self->image_));
  self->image_->unlinkName();  // this process's alone

  proxy::NetProxyConfig cfg;
  cfg.jobKey = comm->commHash;
  cfg.rank = comm->rank;
  cfg.nRanks = comm->nRanks;
  for (int p = 0; p < comm->nRanks; ++p) cfg.peerNames.push_back(core::describeRank(comm->peers[p]));
  cfg.abortRequested = &comm->abortRequested;
  cfg.onFailure = [comm](ncclResult_t code) { failFromProxy(comm, code); };
  cfg.setupTimeoutSec = kSetupTimeout.get();
  bootstrap::SocketAddress bind = comm->bootstrap->listenAddress();
  bind.setPort(0);
  WEFT_TRY(proxy::NetProxy::listen(cfg, bind, &self->proxy_));
  std::vector<proxy::ListenerDesc> descs(comm->nRanks);
  descs[comm->rank] = self->proxy_->desc();
  WEFT_TRY(comm->bootstrap->allGather(descs.data(), sizeof(proxy::ListenerDesc)));

  char* image = self->image_->hostPtr();
  char* mine = local->hostPtr();
  std::vector<proxy::NetSendSide> sends;
  std::vector<proxy::NetRecvSide> recvs;
  for (int c = 0; c < comm->nChannels; ++c) {
    for (int p = 0; p < comm->nRanks; ++p) {
      if (!viaNet(p)) continue;
      const size_t block = layout.counterBlock(c, p);
      if (plan.sendOn[c][p]) {
        proxy::NetSendSide s;
        s.channel = c;
        s.peer = p;
        s.gpuTail = (const volatile uint64_t*)(image + block + kTailOffset);
        s.stepSizes = (const volatile uint64_t*)(mine + block + kHeadOffset) + dev::kStepSizeWord;
        s.slots = image + self->sendSlotsOffset_[self->index(c, p)];
        s.head = (volatile uint64_t*)(mine + block + kHeadOffset);
        s.stepBytes = stepBytes;
        sends.push_back(s);
      }
      if (plan.recvOn[c][p]) {
        proxy::NetRecvSide r;
        r.channel = c;
        r.peer = p;
        r.slots = mine + layout.recvBuffer(plan, c, p) + layout.protoOffset[dev::kProtoSimple];
        r.tail = (volatile uint64_t*)(mine + block + kTailOffset);
        r.gpuHead = (const volatile uint64_t*)(image + block + kHeadOffset);
        r.stepBytes = stepBytes;
        recvs.push_back(r);
      }
    }
  }
  WEFT_TRY(self->proxy_->start(sends, recvs, descs));
  WEFT_INFO(log::kInit | log::kNet, "rank %d: %d send and %d receive connection(s) through the network (socket "
            "proxy listening on %s), %zu KiB of send staging memory", comm->rank, self->nSends_, self->nRecvs_,
            bind.hostString().c_str(), bytes >> 10);
  *out = std::move(self);
  return ncclSuccess;
}

}  // namespace weft::transport
