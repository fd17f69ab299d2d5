#include "transport/net/net_connections.h"

#include <cstdio>
#include <cstring>
#include <utility>

#include "bootstrap/bootstrap.h"
#include "core/comm_init.h"
#include "core/communicator.h"
#include "core/log.h"
#include "core/param.h"
#include "core/peer_info.h"

namespace weft::transport {
namespace {

const param::IntParam kSetupTimeout{"NCCL_BOOTSTRAP_TIMEOUT", 300};

// Bootstrap tags of the plugin's listen infos (sendInfos: the count at tag, the infos at tag + 1),
// at creation and on first use; ncclCommSplit uses 0x53000000 + n.
constexpr int kInfoCountTag = 0x4e000000, kFirstUseCountTag = 0x4e000002;

// What every rank all-gathers at creation: where its socket proxy listens (when it runs one) and
// which network it uses, so that a rank whose NCCL_NET / NCCL_NET_PLUGIN differs is named at once
// instead of waiting for connections of another kind.
struct NetAgreement {
  proxy::ListenerDesc desc;
  char network[32];  // "Socket", or the plugin's name
};

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
  if (pluginProxy_) pluginProxy_->wake();
}

NetConnections::~NetConnections() {
  proxy_.reset();  // joins the thread before the image (and the caller's memory) can go
  pluginProxy_.reset();
}

Status NetConnections::makeHostMemory(const char* kind, int peer, size_t bytes, std::unique_ptr<shm::MappedShm>* out) {
  char tag[48];
  snprintf(tag, sizeof(tag), "%08llx-r%d-net%s", (unsigned long long)(commHash_ & 0xffffffffu), rank_, kind);
  if (peer >= 0) snprintf(tag + strlen(tag), sizeof(tag) - strlen(tag), "%d", peer);
  WEFT_TRY(shm::MappedShm::create(tag, bytes, out));
  (*out)->unlinkName();  // this process's alone
  return ncclSuccess;
}

// The send side's counters: the tail the kernel writes into the image (standing in for the
// receiver's), the step sizes and the credits in the head line of the rank's own memory.
proxy::NetSendSide NetConnections::sendSide(int channel, int peer, char* slots, char* llSlots,
                                            uint64_t llStepBytes) const {
  const size_t block = layout_.counterBlock(channel, peer);
  char* mine = local_->hostPtr();
  proxy::NetSendSide s;
  s.channel = channel;
  s.peer = peer;
  s.gpuTail = (const volatile uint64_t*)(image_->hostPtr() + block + kTailOffset);
  s.stepSizes = (const volatile uint64_t*)(mine + block + kHeadOffset) + dev::kStepSizeWord;
  s.slots = slots;
  s.head = (volatile uint64_t*)(mine + block + kHeadOffset);
  s.stepBytes = stepBytes_;
  s.llSlots = llSlots;
  s.llStepBytes = llSlots != nullptr ? llStepBytes : 0;
  return s;
}

// The receive side's: the tail in the rank's own memory, the head the kernel writes into the image.
proxy::NetRecvSide NetConnections::recvSide(int channel, int peer, char* slots, char* llSlots,
                                            uint64_t llStepBytes) const {
  const size_t block = layout_.counterBlock(channel, peer);
  proxy::NetRecvSide r;
  r.channel = channel;
  r.peer = peer;
  r.slots = slots;
  r.tail = (volatile uint64_t*)(local_->hostPtr() + block + kTailOffset);
  r.gpuHead = (const volatile uint64_t*)(image_->hostPtr() + block + kHeadOffset);
  r.stepBytes = stepBytes_;
  r.llSlots = llSlots;
  r.llStepBytes = llSlots != nullptr ? llStepBytes : 0;
  return r;
}

proxy::NetSendSide NetConnections::p2pOnlySendSide(int channel, int peer, char* buffer) const {
  const bool ll = layout_.p2pLLStepBytes > 0;
  return sendSide(channel, peer, buffer + layout_.p2pOnlyOffset[dev::kProtoSimple],
                  ll ? buffer + layout_.p2pOnlyOffset[dev::kProtoLL] : nullptr, (uint64_t)layout_.p2pLLStepBytes);
}

proxy::NetRecvSide NetConnections::p2pOnlyRecvSide(int channel, int peer, char* buffer) const {
  const bool ll = layout_.p2pLLStepBytes > 0;
  return recvSide(channel, peer, buffer + layout_.p2pOnlyOffset[dev::kProtoSimple],
                  ll ? buffer + layout_.p2pOnlyOffset[dev::kProtoLL] : nullptr, (uint64_t)layout_.p2pLLStepBytes);
}

Status NetConnections::create(ncclComm* comm, const ConnLayout& layout, shm::MappedShm* local,
                              std::unique_ptr<NetConnections>* out) {
  if (local == nullptr) {  // P2pConnections makes it whenever a connected peer is on another host
    WEFT_WARN("rank %d: network connections without host connection memory", comm->rank);
    return ncclInternalError;
  }
  std::unique_ptr<NetConnections> self(new NetConnections());
  self->layout_ = layout;
  self->rank_ = comm->rank;
  self->commHash_ = comm->commHash;
  self->stepBytes_ = (uint64_t)comm->protoStepBytes[dev::kProtoSimple];
  self->llStepBytes_ = (uint64_t)comm->protoStepBytes[dev::kProtoLL];  // 0: LL is off
  self->local_ = local;
  self->firstUseRecv_.resize(comm->nRanks);
  self->firstUseSend_.resize(comm->nRanks);
  const ConnectionPlan& plan = comm->connPlan;
  const int me = comm->rank;
  auto viaNet = [&](int p) { return p < (int)comm->netPeers.size() && comm->netPeers[p]; };
  // Which of this rank's sends are point-to-point-only (made on first use) is the receiver's plan's word.
  std::vector<std::vector<bool>> sendLater(comm->nRanks);
  for (int p = 0; p < comm->nRanks; ++p) {
    if (!viaNet(p)) continue;
    const ConnectionPlan peerPlan = comm->connectionPlanOf(p);
    sendLater[p].assign(comm->nChannels, false);
    for (int c = 0; c < comm->nChannels; ++c) sendLater[p][c] = peerPlan.recvP2pOnly[c][me];
  }
  auto sendNow = [&](int c, int p) { return viaNet(p) && plan.sendOn[c][p] && !sendLater[p][c]; };
  auto recvNow = [&](int c, int p) { return viaNet(p) && plan.recvOn[c][p] && !plan.recvP2pOnly[c][p]; };

  // The image: a counter block per (channel, peer) as in the connection memory (the send tail and
  // the receive head of that pair), then the Simple slots and the LL slots of every network send
  // connection made now.
  self->sendSlotsOffset_.assign((size_t)comm->nChannels * comm->nRanks, 0);
  size_t bytes = layout.buffersStart();
  for (int c = 0; c < comm->nChannels; ++c) {
    for (int p = 0; p < comm->nRanks; ++p) {
      if (sendNow(c, p)) {
        self->sendSlotsOffset_[self->index(c, p)] = bytes;
        bytes += (size_t)dev::kSteps * (self->stepBytes_ + self->llStepBytes_);
        self->nSends_++;
      }
      if (recvNow(c, p)) self->nRecvs_++;
    }
  }
  WEFT_TRY(self->makeHostMemory("", -1, bytes, &self->image_));

  proxy::NetProxyConfig cfg;
  cfg.jobKey = comm->commHash;
  cfg.rank = comm->rank;
  cfg.nRanks = comm->nRanks;
  for (int p = 0; p < comm->nRanks; ++p) cfg.peerNames.push_back(core::describeRank(comm->peers[p]));
  cfg.abortRequested = &comm->abortRequested;
  cfg.onFailure = [comm](ncclResult_t code) { failFromProxy(comm, code); };
  cfg.setupTimeoutSec = kSetupTimeout.get();
  self->bootstrap_ = comm->bootstrap.get();
  self->peerNames_ = cfg.peerNames;

  std::vector<proxy::NetSendSide> sends;
  std::vector<proxy::NetRecvSide> recvs;
  for (int c = 0; c < comm->nChannels; ++c) {
    for (int p = 0; p < comm->nRanks; ++p) {
      if (sendNow(c, p)) {
        char* slots = self->image_->hostPtr() + self->sendSlotsOffset_[self->index(c, p)];
        char* llSlots = self->llStepBytes_ != 0 ? slots + (size_t)dev::kSteps * self->stepBytes_ : nullptr;
        sends.push_back(self->sendSide(c, p, slots, llSlots, self->llStepBytes_));
      }
      if (recvNow(c, p)) {
        char* buffer = local->hostPtr() + layout.recvBuffer(plan, c, p);
        char* llSlots = self->llStepBytes_ != 0 ? buffer + layout.protoOffset[dev::kProtoLL] : nullptr;
        char* slots = buffer + layout.protoOffset[dev::kProtoSimple];
        recvs.push_back(self->recvSide(c, p, slots, llSlots, self->llStepBytes_));
      }
    }
  }
  if (comm->netPlugin != nullptr) {
    WEFT_TRY(self->startPluginProxy(comm, cfg, sends, recvs));
  } else {
    WEFT_TRY(self->startSocketProxy(comm, cfg, sends, recvs));
  }
  WEFT_INFO(log::kInit | log::kNet, "rank %d: %d send and %d receive connection(s) through the network (%s, %s), "
            "%zu KiB of send staging memory; point-to-point ones on first use (%s)", comm->rank, self->nSends_,
            self->nRecvs_, self->proxyText_.c_str(), self->llStepBytes_ != 0 ? "Simple and LL" : "Simple", bytes >> 10,
            layout.p2pLLStepBytes > 0 ? "Simple and LL" : "Simple");
  *out = std::move(self);
  return ncclSuccess;
}

// Every rank names the network it uses; all must use the same (*all: every rank's agreement).
static Status agreeOnNetwork(ncclComm* comm, const NetAgreement& mine, std::vector<NetAgreement>* all) {
  all->assign(comm->nRanks, NetAgreement{});
  (*all)[comm->rank] = mine;
  WEFT_TRY(comm->bootstrap->allGather(all->data(), sizeof(NetAgreement)));
  for (int r = 0; r < comm->nRanks; ++r) {
    NetAgreement& theirs = (*all)[r];
    theirs.network[sizeof(theirs.network) - 1] = 0;
    if (strcmp(theirs.network, mine.network) != 0) {
      WEFT_WARN("rank %d reaches other hosts through the %s network and %s through %s: set NCCL_NET and "
                "NCCL_NET_PLUGIN the same way for every rank (and make the plugin loadable everywhere)", comm->rank,
                mine.network, core::describeRank(comm->peers[r]).c_str(), theirs.network);
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

Status NetConnections::startSocketProxy(ncclComm* comm, const proxy::NetProxyConfig& cfg,
                                        const std::vector<proxy::NetSendSide>& sends,
                                        const std::vector<proxy::NetRecvSide>& recvs) {
  bootstrap::SocketAddress bind = comm->bootstrap->listenAddress();
  bind.setPort(0);
  WEFT_TRY(proxy::NetProxy::listen(cfg, bind, &proxy_));
  NetAgreement mine{};
  mine.desc = proxy_->desc();
  snprintf(mine.network, sizeof(mine.network), "Socket");
  std::vector<NetAgreement> all;
  WEFT_TRY(agreeOnNetwork(comm, mine, &all));
  std::vector<proxy::ListenerDesc> descs;
  for (const NetAgreement& a : all) descs.push_back(a.desc);
  WEFT_TRY(proxy_->start(sends, recvs, descs));
  proxyText_ = "socket proxy listening on " + bind.hostString();
  return ncclSuccess;
}

Status NetConnections::sendInfos(int peer, int tag, const std::vector<proxy::PluginConnectInfo>& infos) {
  const uint32_t count = (uint32_t)infos.size();
  WEFT_TRY(bootstrap_->send(peer, tag, &count, sizeof(count)));
  if (count > 0) WEFT_TRY(bootstrap_->send(peer, tag + 1, infos.data(), count * sizeof(infos[0])));
  return ncclSuccess;
}

// The infos `peer` sent for the send sides of `sends` that go to it, in their order.
Status NetConnections::recvInfos(int peer, int tag, const std::vector<proxy::NetSendSide>& sends,
                                 std::vector<proxy::PluginConnectInfo>* infos) {
  uint32_t count = 0;
  WEFT_TRY(bootstrap_->recv(peer, tag, &count, sizeof(count)));
  if (count > (uint32_t)dev::kMaxChannels) {
    WEFT_WARN("rank %d: %s announced %u network connections to this rank, more than %d channels", rank_,
              peerNames_[peer].c_str(), count, dev::kMaxChannels);
    return ncclRemoteError;
  }
  std::vector<proxy::PluginConnectInfo> got(count);
  if (count > 0) WEFT_TRY(bootstrap_->recv(peer, tag + 1, got.data(), count * sizeof(got[0])));
  for (const proxy::NetSendSide& side : sends) {
    if (side.peer != peer) continue;
    const proxy::PluginConnectInfo* match = nullptr;
    for (const proxy::PluginConnectInfo& info : got) {
      if (info.channel == side.channel) match = &info;
    }
    if (match == nullptr) {
      WEFT_WARN("rank %d: %s sent no network plugin handle for channel %d, where this rank sends to it (do the ranks "
                "agree on the connections? see the other rank's log)", rank_, peerNames_[peer].c_str(), side.channel);
      return ncclRemoteError;
    }
    infos->push_back(*match);  // checked by the proxy
  }
  return ncclSuccess;
}

Status NetConnections::startPluginProxy(ncclComm* comm, const proxy::NetProxyConfig& cfg,
                                        const std::vector<proxy::NetSendSide>& sends,
                                        const std::vector<proxy::NetRecvSide>& recvs) {
  const NetPlugin* plugin = comm->netPlugin;
  const int device = plugin->deviceFor(comm->cudaDev);
  NetPluginDevice props;
  WEFT_TRY(plugin->device(device, &props));
  if (props.maxTransferBytes != 0 && props.maxTransferBytes < stepBytes_) {
    WEFT_WARN("rank %d: network plugin %s moves at most %zu bytes at once, less than a connection step (%llu "
              "bytes): lower NCCL_BUFFSIZE", rank_, plugin->name().c_str(), props.maxTransferBytes,
              (unsigned long long)stepBytes_);
    return ncclInvalidUsage;
  }
  NetAgreement mine{};
  snprintf(mine.network, sizeof(mine.network), "%s", plugin->name().c_str());
  std::vector<NetAgreement> all;
  WEFT_TRY(agreeOnNetwork(comm, mine, &all));
  WEFT_TRY(proxy::PluginProxy::create(cfg, plugin, device, &pluginProxy_));
  std::vector<proxy::PluginConnectInfo> recvInfo;
  WEFT_TRY(pluginProxy_->listen(recvs, &recvInfo));
  for (int p = 0; p < comm->nRanks; ++p) {
    if (!comm->netPeers[p]) continue;
    std::vector<proxy::PluginConnectInfo> toPeer;
    for (size_t i = 0; i < recvs.size(); ++i) {
      if (recvs[i].peer == p) toPeer.push_back(recvInfo[i]);
    }
    WEFT_TRY(sendInfos(p, kInfoCountTag, toPeer));
  }
  std::vector<proxy::PluginConnectInfo> sendInfo;
  for (int p = 0; p < comm->nRanks; ++p) {
    if (comm->netPeers[p]) WEFT_TRY(recvInfos(p, kInfoCountTag, sends, &sendInfo));
  }
  std::vector<proxy::NetSendSide> ordered;  // as recvInfos put the infos: by peer, then as listed
  for (int p = 0; p < comm->nRanks; ++p) {
    for (const proxy::NetSendSide& side : sends) {
      if (side.peer == p) ordered.push_back(side);
    }
  }
  WEFT_TRY(pluginProxy_->start(ordered, sendInfo));
  proxyText_ = "network plugin " + plugin->name() + " v" + std::to_string(plugin->version()) + ", device " +
               std::to_string(device) + (props.name.empty() ? "" : " (" + props.name + ")");
  return ncclSuccess;
}

Status NetConnections::expectP2pOnly(const ConnectionPlan& receiverPlan, int sender, char** deviceBase) {
  const size_t bytes = layout_.p2pOnlyTotal(receiverPlan, sender);
  WEFT_TRY(makeHostMemory("-from", sender, bytes, &firstUseRecv_[sender]));
  std::vector<proxy::NetRecvSide> recvs;
  for (int c = 0; c < layout_.nChannels; ++c) {
    const size_t at = layout_.p2pOnlyBuffer(receiverPlan, c, sender);
    if (at != (size_t)-1) recvs.push_back(p2pOnlyRecvSide(c, sender, firstUseRecv_[sender]->hostPtr() + at));
  }
  if (pluginProxy_) {
    std::vector<proxy::PluginConnectInfo> infos;
    WEFT_TRY(pluginProxy_->listen(recvs, &infos));
    WEFT_TRY(sendInfos(sender, kFirstUseCountTag, infos));  // ahead of the offer, which the sender waits for
  } else {
    WEFT_TRY(proxy_->expectReceives(recvs));
  }
  nRecvs_ += (int)recvs.size();
  *deviceBase = firstUseRecv_[sender]->devicePtr();
  return ncclSuccess;
}

Status NetConnections::connectP2pOnly(const ConnectionPlan& receiverPlan, int receiver, char** deviceBase) {
  const size_t bytes = layout_.p2pOnlyTotal(receiverPlan, rank_);
  WEFT_TRY(makeHostMemory("-to", receiver, bytes, &firstUseSend_[receiver]));
  std::vector<proxy::NetSendSide> sends;
  for (int c = 0; c < layout_.nChannels; ++c) {
    const size_t at = layout_.p2pOnlyBuffer(receiverPlan, c, rank_);
    if (at != (size_t)-1) sends.push_back(p2pOnlySendSide(c, receiver, firstUseSend_[receiver]->hostPtr() + at));
  }
  if (pluginProxy_) {
    std::vector<proxy::PluginConnectInfo> infos;
    WEFT_TRY(recvInfos(receiver, kFirstUseCountTag, sends, &infos));
    WEFT_TRY(pluginProxy_->addSends(sends, infos));
  } else {
    WEFT_TRY(proxy_->addSends(sends));
  }
  nSends_ += (int)sends.size();
  *deviceBase = firstUseSend_[receiver]->devicePtr();
  return ncclSuccess;
}

}  // namespace weft::transport
