#include "transport/p2p/p2p_connections.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "bootstrap/bootstrap.h"
#include "core/communicator.h"
#include "core/cpu_affinity.h"
#include "core/param.h"
#include "core/peer_info.h"
#include "runtime/block_pool.h"
#include "runtime/gpu.h"

namespace weft::transport {
namespace {

const param::IntParam kSetupTimeout{"NCCL_BOOTSTRAP_TIMEOUT", 300};

// Connection memory of the ranks living in this process, by (job key, rank): the legacy path maps
// a same-process peer by its pointer, since CUDA IPC handles cannot be opened by their creator.
struct LocalRegistry {
  std::mutex mutex;
  std::map<std::pair<uint64_t, int>, char*> bases;
};
LocalRegistry& localRegistry() {
  static LocalRegistry* r = new LocalRegistry();
  return *r;
}

// Connection memory is freed while other communicators may run (runtime::releaseWhenSafe).
runtime::ShareableOptions connectionMemory() {
  runtime::ShareableOptions o;
  o.freeWhenSafe = true;
  return o;
}

p2p::Clock::time_point setupDeadline() {
  int64_t s = kSetupTimeout.get();
  return s > 0 ? p2p::Clock::now() + std::chrono::seconds(s) : p2p::Clock::time_point::max();
}

// What a receiver sends a sender when it makes their point-to-point-only connections (bootstrap message).
constexpr uint32_t kOfferMagic = 0x5753504fu;  // "WSPO"
constexpr int kOfferTag = 0x4c000000;          // bootstrap tag (ncclCommSplit uses 0x53000000 + n)
struct P2pOnlyOffer {
  uint32_t magic;
  int32_t receiver;
  int32_t sender;
  uint32_t pad;
  uint64_t bytes;           // ConnLayout::p2pOnlyTotal: what the sender expects
  uint64_t sameProcessPtr;  // legacy CUDA IPC within one process: the buffer's address
  runtime::IpcMemDesc desc;
  shm::ShmDesc shm;         // a peer reached through host shared memory: the segment (desc unused)
};

// What every rank publishes at creation: its GPU connection memory, and its host one when it has
// peers reached through host shared memory (else magic 0).
struct ConnMemDescs {
  runtime::IpcMemDesc gpu;
  shm::ShmDesc host;
};

std::string shmTag(const ncclComm* comm) {
  char tag[24];
  snprintf(tag, sizeof(tag), "%08llx-r%d", (unsigned long long)(comm->commHash & 0xffffffffu), comm->rank);
  return tag;
}

std::string describePeer(const ncclComm* comm, int p) { return core::describeRank(comm->peers[p]); }

// ConnInfo::stepBytes of a point-to-point-only connection laid out by `layout`: Simple as
// everywhere, LL where those connections have LL slots, no LL128.
int p2pOnlyStepBytes(const ncclComm* comm, const ConnLayout& layout, int proto) {
  if (proto == dev::kProtoSimple) return comm->protoStepBytes[proto];
  return proto == dev::kProtoLL ? layout.p2pLLStepBytes : 0;
}

}  // namespace

std::vector<bool> connectedPeers(const ConnectionPlan& plan) {
  std::vector<bool> peers(plan.nRanks, false);
  for (int c = 0; c < plan.nChannels; ++c) {
    for (int p = 0; p < plan.nRanks; ++p) {
      if (plan.sendOn[c][p] || plan.recvOn[c][p]) peers[p] = true;
    }
  }
  return peers;
}

char* P2pConnections::localFor(int p) const {
  return (viaShm(p) || viaNet(p)) && hostLocal_ ? hostLocal_->devicePtr() : (char*)local_.ptr();
}

P2pConnections::~P2pConnections() {
  netConns_.reset();  // stops the proxy before any memory it writes goes
  if (sharing_ != nullptr && sharing_->sharedAny()) reportDirectReceives();
  sharing_.reset();  // unmaps the peers' registrations
  hostPeers_.clear();  // unmap the peers' host memory before our own goes
  p2pOnlyHostImported_.clear();
  p2pOnlyHostLocal_.clear();
  hostLocal_.reset();
  if (registered_) {
    LocalRegistry& reg = localRegistry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reg.bases.erase({jobKey_, rank_});
  }
  if (uploadStream_) (void)runtime::streamDestroy(uploadStream_);
  for (dev::DevPeer* table : deviceTables_) runtime::deviceBlockRelease(table);
  imported_.clear();  // unmap peers' memory before our own goes
  p2pOnlyImported_.clear();
  p2pOnlyLocal_.clear();
  local_.reset();
}

Status P2pConnections::create(ncclComm* comm, std::unique_ptr<P2pConnections>* out) {
  std::unique_ptr<P2pConnections> self(new P2pConnections());
  self->layout_ = ConnLayout::forSteps(comm->nChannels, comm->nRanks, comm->protoStepBytes, comm->p2pLLStepBytes);
  self->imported_.resize(comm->nRanks);
  self->peerBase_.assign(comm->nRanks, nullptr);
  self->p2pOnlyLocal_.resize(comm->nRanks);
  self->p2pOnlyImported_.resize(comm->nRanks);
  self->shm_.assign(comm->nRanks, false);
  for (int p = 0; p < comm->nRanks && p < (int)comm->shmPeers.size(); ++p) self->shm_[p] = comm->shmPeers[p];
  self->net_.assign(comm->nRanks, false);
  for (int p = 0; p < comm->nRanks && p < (int)comm->netPeers.size(); ++p) self->net_[p] = comm->netPeers[p];
  self->hostPeers_.resize(comm->nRanks);
  self->p2pOnlyHostLocal_.resize(comm->nRanks);
  self->p2pOnlyHostImported_.resize(comm->nRanks);
  std::vector<ConnMemDescs> descs(comm->nRanks);

  size_t bytes = self->layout_.totalBytes(comm->connPlan);
  if (comm->nRanks > 1) {
    WEFT_TRY(p2p::FdEndpoint::create(comm->commHash, comm->rank, p2p::fdSocketDirFromEnv(),
                                     &self->endpoint_));
    const std::vector<bool> connected = connectedPeers(comm->connPlan);
    bool shmAny = false, hostAny = false, hostAll = true;
    for (int p = 0; p < comm->nRanks; ++p) {
      if (!connected[p]) continue;
      shmAny = shmAny || self->viaShm(p);
      hostAny = hostAny || self->viaShm(p) || self->viaNet(p);
      hostAll = hostAll && (self->viaShm(p) || self->viaNet(p));
    }
    // With every peer through host memory no peer maps the GPU allocation: only the counters stay
    // (the direct-receive count reads them); the staging buffers live in the host segment.
    const size_t gpuBytes = hostAny && hostAll ? self->layout_.buffersStart() : bytes;
    WEFT_TRY(runtime::allocShareable(gpuBytes, &self->local_, connectionMemory()));
    WEFT_TRY(runtime::deviceMemset(self->local_.ptr(), 0, self->local_.bytes()));
    WEFT_TRY(runtime::exportMem(self->local_, 0, self->local_.bytes(), &descs[comm->rank].gpu));
    if (hostAny) {
      WEFT_TRY(shm::MappedShm::create(shmTag(comm), bytes, &self->hostLocal_));
      if (shmAny) descs[comm->rank].host = self->hostLocal_->desc();  // else no peer opens it
      else self->hostLocal_->unlinkName();
    }
    self->jobKey_ = comm->commHash;
    self->rank_ = comm->rank;
    {
      LocalRegistry& reg = localRegistry();
      std::lock_guard<std::mutex> lock(reg.mutex);
      reg.bases[{self->jobKey_, self->rank_}] = (char*)self->local_.ptr();
      self->registered_ = true;
    }
    // Every endpoint exists before this exchange completes, so fds sent after it find their target.
    WEFT_TRY(comm->bootstrap->allGather(descs.data(), sizeof(ConnMemDescs)));
    std::vector<runtime::IpcMemDesc> gpuDescs(comm->nRanks);
    std::vector<shm::ShmDesc> hostDescs(comm->nRanks);
    for (int p = 0; p < comm->nRanks; ++p) {
      gpuDescs[p] = descs[p].gpu;
      hostDescs[p] = descs[p].host;
    }
    WEFT_TRY(self->mapPeers(comm, gpuDescs));
    WEFT_TRY(self->mapShmPeers(comm, hostDescs));
    if (comm->anyNet) WEFT_TRY(NetConnections::create(comm, self->layout_, self->hostLocal_.get(), &self->netConns_));
    std::vector<bool> sharePeers = connectedPeers(comm->connPlan);  // zero-copy needs peer access
    for (int p = 0; p < comm->nRanks; ++p) sharePeers[p] = sharePeers[p] && !self->viaShm(p) && !self->viaNet(p);
    WEFT_TRY(p2p::RegSharing::create(comm, self->endpoint_.get(), sharePeers, &self->sharing_));
    int p2pOnly = 0;
    for (const auto& row : comm->connPlan.recvP2pOnly) p2pOnly += (int)std::count(row.begin(), row.end(), true);
    // The footprint formula, spelled out (README, "Memory"): the main allocation is the counters
    // plus one staging buffer per receive connection that is not point-to-point-only.
    const ConnLayout& l = self->layout_;
    const double mib = 1 << 20;
    WEFT_INFO(log::kInit | log::kP2p, "rank %d: connection memory %zu KiB on the GPU (%s) and %zu KiB of host shared "
              "memory = %zu KiB of counters + %d receive connections x %.2f MiB (LL %.2f, LL128 %.2f, Simple %.2f), "
              "rounded up to the allocation granularity; %d more receive connections are point-to-point-only "
              "(%.2f MiB each, %s)", comm->rank, self->local_.bytes() >> 10,
              runtime::memKindName(self->local_.kind()), self->hostLocal_ ? self->hostLocal_->bytes() >> 10 : 0,
              l.buffersStart() >> 10, comm->connPlan.recvConnectionCount() - p2pOnly, l.bufferBytes / mib,
              (l.protoOffset[dev::kProtoLL128] - l.protoOffset[dev::kProtoLL]) / mib,
              (l.protoOffset[dev::kProtoSimple] - l.protoOffset[dev::kProtoLL128]) / mib,
              (l.bufferBytes - l.protoOffset[dev::kProtoSimple]) / mib, p2pOnly, l.p2pOnlyBytes / mib,
              comm->runtimeConnect ? "made on first use" : "made now");
  }
  self->buildDevPeers(comm);
  WEFT_TRY(self->makeDeviceTables());
  if (!comm->runtimeConnect && self->pending_ > 0) {
    // Every rank offers before it waits for an offer: nobody waits for a rank that waits.
    std::vector<int> all;
    for (int p = 0; p < comm->nRanks; ++p)
      if (p != comm->rank) all.push_back(p);
    WEFT_TRY(self->offerReceives(comm, all));
    WEFT_TRY(self->acceptSends(comm, all));
  }
  *out = std::move(self);
  return ncclSuccess;
}

Status P2pConnections::mapPeers(ncclComm* comm, const std::vector<runtime::IpcMemDesc>& descs) {
  std::vector<bool> peers = connectedPeers(comm->connPlan);
  const core::PeerInfo& me = comm->peers[comm->rank];
  auto deadline = setupDeadline();
  // Pushes first: every fd is on its way before anyone waits for one.
  for (int p = 0; p < comm->nRanks; ++p) peers[p] = peers[p] && !viaShm(p) && !viaNet(p);  // not mapped here
  if (local_.kind() == runtime::MemKind::kCuMemFd) {
    for (int p = 0; p < comm->nRanks; ++p) {
      if (!peers[p]) continue;
      util::UniqueFd fd;
      WEFT_TRY(local_.exportFd(&fd));
      WEFT_TRY(endpoint_->sendFd(p, fd.get(), local_.localId(), deadline, &comm->abortRequested));
    }
  }
  for (int p = 0; p < comm->nRanks; ++p) {
    if (!peers[p]) continue;
    const std::string fromText = describePeer(comm, p);
    const char* from = fromText.c_str();
    const runtime::IpcMemDesc& d = descs[p];
    WEFT_TRY(runtime::checkIpcMemDesc(d, from));
    // The kernels address the peer's memory by this rank's idea of its layout: it must all be there.
    const size_t need = layout_.totalBytes(comm->connectionPlanOf(p));
    if (d.bytes < need) {
      WEFT_WARN("rank %d: %s shares %llu bytes of GPU connection memory; its layout needs %zu (do the ranks differ "
                "in NCCL_BUFFSIZE, channel counts or transports?)", comm->rank, from, (unsigned long long)d.bytes, need);
      return ncclInternalError;
    }
    bool sameProcess = comm->peers[p].processHash == me.processHash;
    if (d.kind == (uint32_t)runtime::MemKind::kCuMemFd) {
      util::UniqueFd fd;
      WEFT_TRY(endpoint_->recvFd(p, d.localId, deadline, &comm->abortRequested, &fd));
      WEFT_TRY(runtime::importMem(d, fd.get(), &imported_[p], from));
      peerBase_[p] = (char*)imported_[p].ptr();
    } else if (sameProcess) {
      // A legacy CUDA IPC handle cannot be opened by its own process: use the pointer with peer
      // access (the owner's memory must then outlive this communicator's kernels).
      WEFT_TRY(runtime::enablePeerAccess(comm->peers[p].cudaDev));
      {
        LocalRegistry& reg = localRegistry();
        std::lock_guard<std::mutex> lock(reg.mutex);
        auto it = reg.bases.find({jobKey_, p});
        peerBase_[p] = it == reg.bases.end() ? nullptr : it->second;
      }
      WEFT_ASSERT(peerBase_[p] != nullptr);
    } else {
      WEFT_TRY(runtime::importMem(d, -1, &imported_[p], from));
      peerBase_[p] = (char*)imported_[p].ptr();
    }
  }
  return ncclSuccess;
}

// Every rank that published host connection memory has an SHM peer; those of ours map it. The
// names go once all ranks have mapped theirs (a barrier: every rank knows whether anyone made one).
Status P2pConnections::mapShmPeers(ncclComm* comm, const std::vector<shm::ShmDesc>& descs) {
  const std::vector<bool> connected = connectedPeers(comm->connPlan);
  bool anyone = false;
  for (int p = 0; p < comm->nRanks; ++p) {
    anyone = anyone || descs[p].magic != 0;
    if (p == comm->rank || !connected[p] || !viaShm(p)) continue;
    const std::string from = describePeer(comm, p);
    if (descs[p].magic == 0) {
      WEFT_WARN("rank %d: %s made no shared host memory for its connections with this rank, which reaches it "
                "through host shared memory: the ranks chose different transports", comm->rank, from.c_str());
      return ncclInternalError;
    }
    WEFT_TRY(shm::MappedShm::open(descs[p], from.c_str(), &hostPeers_[p]));
    const size_t need = layout_.totalBytes(comm->connectionPlanOf(p));
    if (hostPeers_[p]->bytes() < need) {
      WEFT_WARN("rank %d: %s shares %zu bytes of host connection memory; its layout needs %zu", comm->rank,
                from.c_str(), hostPeers_[p]->bytes(), need);
      return ncclInternalError;
    }
    peerBase_[p] = hostPeers_[p]->devicePtr();
  }
  if (!anyone) return ncclSuccess;
  WEFT_TRY(comm->bootstrap->barrier());
  if (hostLocal_) hostLocal_->unlinkName();
  return ncclSuccess;
}

void P2pConnections::buildDevPeers(const ncclComm* comm) {
  const int me = comm->rank;
  // Each peer's plan says where its receive buffers are (and which of them are point-to-point-only).
  std::vector<ConnectionPlan> peerPlans(comm->nRanks);
  for (int p = 0; p < comm->nRanks; ++p)
    if (p != me) peerPlans[p] = comm->connectionPlanOf(p);
  devPeers_.assign(comm->nChannels, std::vector<dev::DevPeer>(comm->nRanks));
  sendP2pOnly_.assign(comm->nChannels, std::vector<bool>(comm->nRanks, false));
  recvP2pOnly_.assign(comm->nChannels, std::vector<bool>(comm->nRanks, false));
  std::vector<bool> sendLater(comm->nRanks, false), recvLater(comm->nRanks, false);
  for (int c = 0; c < comm->nChannels; ++c) {
    for (int p = 0; p < comm->nRanks; ++p) {
      dev::DevPeer& dp = devPeers_[c][p];
      memset(&dp, 0, sizeof(dp));
      char* local = localFor(p);
      if (comm->connPlan.sendOn[c][p]) {
        // We write into p's buffer for (c, from us) and its tail; p writes our head for (c, p).
        // A point-to-point-only connection's buffer comes on first use (acceptSends).
        const ConnectionPlan& peerPlan = peerPlans[p];
        const bool later = peerPlan.recvP2pOnly[c][me];
        sendP2pOnly_[c][p] = later;
        sendLater[p] = sendLater[p] || later;
        for (int proto = 0; proto < dev::kNumProtos; ++proto) {
          dp.send.stepBytes[proto] = later ? p2pOnlyStepBytes(comm, layout_, proto) : comm->protoStepBytes[proto];
          if (later) continue;
          if (viaNet(p)) {  // into memory of ours that the proxy sends from (Simple and LL)
            if (proto == dev::kProtoSimple) dp.send.buffs[proto] = netConns_->sendSlots(c, p);
            if (proto == dev::kProtoLL) dp.send.buffs[proto] = netConns_->sendLLSlots(c, p);
            continue;
          }
          dp.send.buffs[proto] = peerBase_[p] + layout_.recvBuffer(peerPlan, c, me) + layout_.protoOffset[proto];
        }
        dp.send.tail = viaNet(p) ? netConns_->sendTail(c, p)
                                 : (volatile uint64_t*)(peerBase_[p] + layout_.counterBlock(c, me) + kTailOffset);
        dp.send.head = (volatile uint64_t*)(local + layout_.counterBlock(c, p) + kHeadOffset);
        dp.sendRegs = sharing_ ? sharing_->deviceSlots(p) : nullptr;
      }
      if (comm->connPlan.recvOn[c][p]) {
        const bool later = comm->connPlan.recvP2pOnly[c][p];  // offerReceives makes its buffer
        recvP2pOnly_[c][p] = later;
        recvLater[p] = recvLater[p] || later;
        for (int proto = 0; proto < dev::kNumProtos; ++proto) {
          dp.recv.buffs[proto] = later ? nullptr : local + layout_.recvBuffer(comm->connPlan, c, p) + layout_.protoOffset[proto];
          dp.recv.stepBytes[proto] = later ? p2pOnlyStepBytes(comm, layout_, proto) : comm->protoStepBytes[proto];
        }
        dp.recv.tail = (volatile uint64_t*)(local + layout_.counterBlock(c, p) + kTailOffset);
        dp.recv.head = viaNet(p) ? netConns_->recvHead(c, p)
                                 : (volatile uint64_t*)(peerBase_[p] + layout_.counterBlock(c, me) + kHeadOffset);
      }
    }
  }
  sendReady_.assign(comm->nRanks, false);
  recvReady_.assign(comm->nRanks, false);
  pending_ = 0;
  for (int p = 0; p < comm->nRanks; ++p) {
    sendReady_[p] = !sendLater[p];
    recvReady_[p] = !recvLater[p];
    pending_ += (int)sendLater[p] + (int)recvLater[p];
  }
}

void P2pConnections::reportDirectReceives() const {
  std::vector<uint64_t> words(layout_.countersBytes() / sizeof(uint64_t));
  if (words.empty()) return;
  if (runtime::deviceMemcpy(words.data(), local_.ptr(), layout_.countersBytes()) != ncclSuccess) return;
  uint64_t parts = 0;
  for (int c = 0; c < layout_.nChannels; ++c)
    for (int p = 0; p < layout_.nRanks; ++p)
      parts += words[(layout_.counterBlock(c, p) + kTailOffset) / sizeof(uint64_t) + dev::kDirectCountWord];
  WEFT_INFO(log::kReg, "rank %d: %llu receive part(s) landed directly in registered buffers (zero-copy)", rank_,
            (unsigned long long)parts);
}

Status P2pConnections::makeDeviceTables() {
  deviceTables_.assign(devPeers_.size(), nullptr);
  for (size_t c = 0; c < devPeers_.size(); ++c) {
    void* table = nullptr;
    const size_t bytes = sizeof(dev::DevPeer) * devPeers_[c].size();
    WEFT_TRY(runtime::deviceBlockAcquire(bytes, &table));  // runtime/block_pool.h: why
    deviceTables_[c] = (dev::DevPeer*)table;
    WEFT_TRY(runtime::deviceMemcpy(table, devPeers_[c].data(), bytes));
  }
  return ncclSuccess;
}

void P2pConnections::setP2pOnlyBuffers(char* buffer, dev::ConnInfo* conn) const {
  conn->buffs[dev::kProtoSimple] = buffer + layout_.p2pOnlyOffset[dev::kProtoSimple];
  if (layout_.p2pLLStepBytes > 0) conn->buffs[dev::kProtoLL] = buffer + layout_.p2pOnlyOffset[dev::kProtoLL];
}

// Writes the buffer pointers of one direction of (channel, peer) into the device table, and
// nothing else: the entry's other fields are the kernels' (ConnInfo::step is saved there at every
// kernel's end, and the other direction may be a ring connection in use), so rewriting the whole
// entry from the host copy would reset a live step counter. No kernel reads these pointers before
// the connection is made. A stream of our own keeps the copy away from the user's streams (which
// may be capturing).
Status P2pConnections::uploadP2pBuffers(int channel, int peer, bool send) {
  if (uploadStream_ == nullptr) WEFT_TRY(runtime::streamCreate(&uploadStream_));
  const dev::ConnInfo& host = send ? devPeers_[channel][peer].send : devPeers_[channel][peer].recv;
  dev::ConnInfo* device = send ? &deviceTables_[channel][peer].send : &deviceTables_[channel][peer].recv;
  return runtime::deviceMemcpyAsync(device->buffs, host.buffs, sizeof(host.buffs), uploadStream_);
}

Status P2pConnections::offerReceives(ncclComm* comm, const std::vector<int>& senders) {
  const auto deadline = setupDeadline();
  core::ScopedCpuAffinity affinity(comm->gpuCpuMap, comm->rank);  // segments made here: next to the GPU
  for (int p : senders) {
    if (recvReady_[p]) continue;
    runtime::ShareableAlloc& alloc = p2pOnlyLocal_[p];
    P2pOnlyOffer offer{};
    offer.magic = kOfferMagic;
    offer.receiver = comm->rank;
    offer.sender = p;
    offer.bytes = layout_.p2pOnlyTotal(comm->connPlan, p);
    char* base = nullptr;
    if (viaNet(p)) {
      // Declared to the proxy before the offer goes: the sender connects once it has the offer.
      WEFT_TRY(netConns_->expectP2pOnly(comm->connPlan, p, &base));
    } else if (viaShm(p)) {
      // The sender removes its name once mapped (whenever it gets there), else this communicator's end.
      WEFT_TRY(shm::MappedShm::create(shmTag(comm) + "-p" + std::to_string(p), offer.bytes, &p2pOnlyHostLocal_[p]));
      offer.shm = p2pOnlyHostLocal_[p]->desc();
      base = p2pOnlyHostLocal_[p]->devicePtr();
    } else {
      WEFT_TRY(runtime::allocShareable(offer.bytes, &alloc, connectionMemory()));
      // LL slots must start zeroed (a stale line could carry a valid flag); host memory comes zeroed.
      if (layout_.p2pLLStepBytes > 0) WEFT_TRY(runtime::deviceMemset(alloc.ptr(), 0, alloc.bytes()));
      WEFT_TRY(runtime::exportMem(alloc, 0, alloc.bytes(), &offer.desc));
      offer.sameProcessPtr = (uint64_t)(uintptr_t)alloc.ptr();
      base = (char*)alloc.ptr();
    }
    if (!viaShm(p) && !viaNet(p) && alloc.kind() == runtime::MemKind::kCuMemFd) {
      util::UniqueFd fd;
      WEFT_TRY(alloc.exportFd(&fd));
      WEFT_TRY(endpoint_->sendFd(p, fd.get(), alloc.localId(), deadline, &comm->abortRequested));
    }
    WEFT_TRY(comm->bootstrap->send(p, kOfferTag, &offer, sizeof(offer)));
    for (int c = 0; c < comm->nChannels; ++c) {
      if (!recvP2pOnly_[c][p]) continue;
      setP2pOnlyBuffers(base + layout_.p2pOnlyBuffer(comm->connPlan, c, p), &devPeers_[c][p].recv);
      WEFT_TRY(uploadP2pBuffers(c, p, /*send=*/false));
    }
    recvReady_[p] = true;
    --pending_;
    WEFT_INFO(log::kP2p, "rank %d: made the point-to-point connections from rank %d (%zu KiB, %s)", comm->rank,
              p, (size_t)offer.bytes >> 10, layout_.p2pLLStepBytes > 0 ? "Simple and LL" : "Simple");
  }
  return uploadStream_ ? runtime::streamSynchronize(uploadStream_) : ncclSuccess;
}

Status P2pConnections::acceptSends(ncclComm* comm, const std::vector<int>& receivers) {
  const int me = comm->rank;
  const auto deadline = setupDeadline();
  for (int p : receivers) {
    if (sendReady_[p]) continue;
    const std::string from = describePeer(comm, p);
    const ConnectionPlan peerPlan = comm->connectionPlanOf(p);
    P2pOnlyOffer offer{};
    WEFT_TRY(comm->bootstrap->recv(p, kOfferTag, &offer, sizeof(offer)));
    const size_t expected = layout_.p2pOnlyTotal(peerPlan, me);
    if (offer.magic != kOfferMagic || offer.receiver != p || offer.sender != me || offer.bytes != expected) {
      WEFT_WARN("rank %d: the point-to-point connection offer from %s is not what this rank expects (magic 0x%x, "
                "ranks %d->%d, %llu bytes; expected %d->%d, %zu bytes)", me, from.c_str(), offer.magic, offer.sender,
                offer.receiver, (unsigned long long)offer.bytes, me, p, expected);
      return ncclInternalError;
    }
    char* base = nullptr;
    if (viaNet(p)) {
      WEFT_TRY(netConns_->connectP2pOnly(peerPlan, p, &base));
    } else if (viaShm(p)) {
      WEFT_TRY(shm::MappedShm::open(offer.shm, from.c_str(), &p2pOnlyHostImported_[p]));
      p2pOnlyHostImported_[p]->unlinkAsOnlyOpener();  // made for this rank alone
      if (p2pOnlyHostImported_[p]->bytes() < expected) {
        WEFT_WARN("rank %d: %s offered %zu bytes of host memory for point-to-point connections that need %zu", me,
                  from.c_str(), p2pOnlyHostImported_[p]->bytes(), expected);
        return ncclInternalError;
      }
      base = p2pOnlyHostImported_[p]->devicePtr();
    } else {
      WEFT_TRY(runtime::checkIpcMemDesc(offer.desc, from.c_str()));
      if (offer.desc.bytes < expected) {
        WEFT_WARN("rank %d: %s offered %llu bytes for point-to-point connections that need %zu", me, from.c_str(),
                  (unsigned long long)offer.desc.bytes, expected);
        return ncclInternalError;
      }
      runtime::ImportedMem& imported = p2pOnlyImported_[p];
      if (offer.desc.kind == (uint32_t)runtime::MemKind::kCuMemFd) {
        util::UniqueFd fd;
        WEFT_TRY(endpoint_->recvFd(p, offer.desc.localId, deadline, &comm->abortRequested, &fd));
        WEFT_TRY(runtime::importMem(offer.desc, fd.get(), &imported, from.c_str()));
        base = (char*)imported.ptr();
      } else if (comm->peers[p].processHash == comm->peers[me].processHash) {
        base = (char*)(uintptr_t)offer.sameProcessPtr;  // legacy handles cannot be opened by their process
      } else {
        WEFT_TRY(runtime::importMem(offer.desc, -1, &imported, from.c_str()));
        base = (char*)imported.ptr();
      }
    }
    for (int c = 0; c < comm->nChannels; ++c) {
      if (!sendP2pOnly_[c][p]) continue;
      setP2pOnlyBuffers(base + layout_.p2pOnlyBuffer(peerPlan, c, me), &devPeers_[c][p].send);
      WEFT_TRY(uploadP2pBuffers(c, p, /*send=*/true));
    }
    sendReady_[p] = true;
    --pending_;
    WEFT_INFO(log::kP2p, "rank %d: mapped the point-to-point connections to rank %d", me, p);
  }
  return uploadStream_ ? runtime::streamSynchronize(uploadStream_) : ncclSuccess;
}

}  // namespace weft::transport
