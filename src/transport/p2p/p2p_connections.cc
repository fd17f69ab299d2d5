#include "transport/p2p/p2p_connections.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "bootstrap/bootstrap.h"
#include "core/communicator.h"
#include "core/param.h"
#include "core/peer_info.h"
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

p2p::Clock::time_point setupDeadline() {
  int64_t s = kSetupTimeout.get();
  return s > 0 ? p2p::Clock::now() + std::chrono::seconds(s) : p2p::Clock::time_point::max();
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

P2pConnections::~P2pConnections() {
  if (registered_) {
    LocalRegistry& reg = localRegistry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reg.bases.erase({jobKey_, rank_});
  }
  imported_.clear();  // unmap peers' memory before our own goes
  local_.reset();
}

Status P2pConnections::create(ncclComm* comm, std::unique_ptr<P2pConnections>* out) {
  std::unique_ptr<P2pConnections> self(new P2pConnections());
  self->layout_ = ConnLayout::forSteps(comm->nChannels, comm->nRanks, comm->protoStepBytes);
  self->imported_.resize(comm->nRanks);
  self->peerBase_.assign(comm->nRanks, nullptr);
  std::vector<runtime::IpcMemDesc> descs(comm->nRanks);

  size_t bytes = self->layout_.totalBytes(comm->connPlan);
  if (comm->nRanks > 1) {
    WEFT_TRY(p2p::FdEndpoint::create(comm->commHash, comm->rank, p2p::fdSocketDirFromEnv(),
                                     &self->endpoint_));
    WEFT_TRY(runtime::allocShareable(bytes, &self->local_));
    WEFT_TRY(runtime::deviceMemset(self->local_.ptr(), 0, self->local_.bytes()));
    WEFT_TRY(runtime::exportMem(self->local_, 0, self->local_.bytes(), &descs[comm->rank]));
    self->jobKey_ = comm->commHash;
    self->rank_ = comm->rank;
    {
      LocalRegistry& reg = localRegistry();
      std::lock_guard<std::mutex> lock(reg.mutex);
      reg.bases[{self->jobKey_, self->rank_}] = (char*)self->local_.ptr();
      self->registered_ = true;
    }
    // Every endpoint exists before this exchange completes, so fds sent after it find their target.
    WEFT_TRY(comm->bootstrap->allGather(descs.data(), sizeof(runtime::IpcMemDesc)));
    WEFT_TRY(self->mapPeers(comm, descs));
    int simpleOnly = 0;
    for (const auto& row : comm->connPlan.recvSimpleOnly) simpleOnly += (int)std::count(row.begin(), row.end(), true);
    WEFT_INFO(log::kInit | log::kP2p, "rank %d: P2P connection memory %zu KiB (%s), %d receive connections (%d of "
              "them Simple-only)", comm->rank, bytes >> 10, runtime::memKindName(self->local_.kind()),
              comm->connPlan.recvConnectionCount(), simpleOnly);
  }
  self->buildDevPeers(comm);
  *out = std::move(self);
  return ncclSuccess;
}

Status P2pConnections::mapPeers(ncclComm* comm, const std::vector<runtime::IpcMemDesc>& descs) {
  std::vector<bool> peers = connectedPeers(comm->connPlan);
  const core::PeerInfo& me = comm->peers[comm->rank];
  auto deadline = setupDeadline();
  // Pushes first: every fd is on its way before anyone waits for one.
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
    char from[160];
    snprintf(from, sizeof(from), "rank %d (pid %d on %s)", p, comm->peers[p].pid, comm->peers[p].hostName);
    const runtime::IpcMemDesc& d = descs[p];
    WEFT_TRY(runtime::checkIpcMemDesc(d, from));
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

void P2pConnections::buildDevPeers(const ncclComm* comm) {
  const int me = comm->rank;
  char* local = (char*)local_.ptr();
  // Each peer's plan says where its receive buffers are (and which of them are Simple-only).
  std::vector<ConnectionPlan> peerPlans(comm->nRanks);
  for (int p = 0; p < comm->nRanks; ++p)
    if (p != me) peerPlans[p] = comm->connectionPlanOf(p);
  devPeers_.assign(comm->nChannels, std::vector<dev::DevPeer>(comm->nRanks));
  for (int c = 0; c < comm->nChannels; ++c) {
    for (int p = 0; p < comm->nRanks; ++p) {
      dev::DevPeer& dp = devPeers_[c][p];
      memset(&dp, 0, sizeof(dp));
      if (comm->connPlan.sendOn[c][p]) {
        // We write into p's buffer for (c, from us) and its tail; p writes our head for (c, p).
        const ConnectionPlan& peerPlan = peerPlans[p];
        char* buf = peerBase_[p] + layout_.recvBuffer(peerPlan, c, me);
        for (int proto = 0; proto < dev::kNumProtos; ++proto) {
          const size_t off = layout_.protoOffsetOf(peerPlan, c, me, proto);
          dp.send.buffs[proto] = off == (size_t)-1 ? nullptr : buf + off;
          dp.send.stepBytes[proto] = comm->protoStepBytes[proto];
        }
        dp.send.tail = (volatile uint64_t*)(peerBase_[p] + layout_.counterBlock(c, me) + kTailOffset);
        dp.send.head = (volatile uint64_t*)(local + layout_.counterBlock(c, p) + kHeadOffset);
      }
      if (comm->connPlan.recvOn[c][p]) {
        char* buf = local + layout_.recvBuffer(comm->connPlan, c, p);
        for (int proto = 0; proto < dev::kNumProtos; ++proto) {
          const size_t off = layout_.protoOffsetOf(comm->connPlan, c, p, proto);
          dp.recv.buffs[proto] = off == (size_t)-1 ? nullptr : buf + off;
          dp.recv.stepBytes[proto] = comm->protoStepBytes[proto];
        }
        dp.recv.tail = (volatile uint64_t*)(local + layout_.counterBlock(c, p) + kTailOffset);
        dp.recv.head = (volatile uint64_t*)(peerBase_[p] + layout_.counterBlock(c, me) + kHeadOffset);
      }
    }
  }
}

}  // namespace weft::transport
