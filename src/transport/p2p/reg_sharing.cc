#include "transport/p2p/reg_sharing.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>

#include "core/communicator.h"
#include "core/log.h"
#include "core/peer_info.h"
#include "runtime/block_pool.h"

namespace weft::transport::p2p {
namespace {

// Sharing is an optimisation: a peer that does not take a message within this long (its fd
// endpoint thread is behind) costs this rank no more than that; the transfer takes the buffers.
constexpr auto kSendWithin = std::chrono::seconds(2);

// A message of `kind` about registration `token`, every other byte zero (nothing stray on the wire).
RegShareMsg message(RegShareKind kind, uint64_t token) {
  RegShareMsg m;
  std::memset(&m, 0, sizeof(m));
  m.magic = kRegShareMagic;
  m.kind = (uint32_t)kind;
  m.token = token;
  return m;
}

std::string peerName(const ncclComm* comm, int p) {
  return "rank " + std::to_string(p) + " (pid " + std::to_string(comm->peers[p].pid) + ")";
}

}  // namespace

bool checkRegShareMsg(const void* data, size_t bytes, bool withFd, RegShareMsg* out, const char** why) {
  *why = nullptr;
  if (bytes != sizeof(RegShareMsg)) {
    *why = "a message of the wrong size";
    return false;
  }
  RegShareMsg m;
  std::memcpy(&m, data, sizeof(m));
  if (m.magic != kRegShareMagic) {
    *why = "a message without the registration-sharing magic";
  } else if (m.kind != (uint32_t)RegShareKind::kShare && m.kind != (uint32_t)RegShareKind::kWithdraw) {
    *why = "a message of an unknown kind";
  } else if (m.token == 0) {
    *why = "a message naming registration 0";
  } else if (m.kind == (uint32_t)RegShareKind::kWithdraw) {
    if (withFd) *why = "a withdrawal carrying a file descriptor";
  } else if (m.bytes == 0 || m.bytes != m.desc.bytes ||
             runtime::checkIpcMemDesc(m.desc, "a sharing peer") != ncclSuccess) {
    *why = "a share with a bad memory descriptor";
  } else if (withFd != (m.desc.kind == (uint32_t)runtime::MemKind::kCuMemFd)) {
    *why =
        withFd ? "a share of legacy IPC memory carrying a file descriptor" : "a share of cuMem memory without its fd";
  }
  if (*why != nullptr) return false;
  *out = m;
  return true;
}

Status RegSharing::create(ncclComm* comm, FdEndpoint* endpoint, const std::vector<bool>& peers,
                          std::unique_ptr<RegSharing>* out) {
  std::unique_ptr<RegSharing> self(new RegSharing());
  self->endpoint_ = endpoint;
  self->rank_ = comm->rank;
  self->peerIndex_.assign(comm->nRanks, -1);
  self->liveSlots_.assign(comm->nRanks, 0);
  int n = 0;
  for (int p = 0; p < comm->nRanks; ++p)
    if (p != comm->rank && peers[p]) self->peerIndex_[p] = n++;
  if (n > 0) {
    const size_t bytes = sizeof(dev::DevRegSlot) * dev::kMaxPeerRegs * (size_t)n;
    void* slots = nullptr;
    WEFT_TRY(runtime::deviceBlockAcquire(bytes, &slots));  // runtime/block_pool.h: why
    self->deviceSlots_ = static_cast<dev::DevRegSlot*>(slots);
    WEFT_TRY(runtime::deviceMemset(slots, 0, bytes));
    self->hostSlots_.assign((size_t)n * dev::kMaxPeerRegs, dev::DevRegSlot{});
  }
  *out = std::move(self);
  return ncclSuccess;
}

RegSharing::~RegSharing() {
  mapped_.clear();  // unmaps the peers' memory
  runtime::deviceBlockRelease(deviceSlots_);
}

const dev::DevRegSlot* RegSharing::deviceSlots(int peer) const {
  if (peer < 0 || peer >= (int)peerIndex_.size() || peerIndex_[peer] < 0) return nullptr;
  return deviceSlots_ + (size_t)peerIndex_[peer] * dev::kMaxPeerRegs;
}

void RegSharing::shareForReceive(ncclComm* comm, int peer, const core::Registration& reg, const void* ptr,
                                 uint64_t* token, uint64_t* offset) {
  *token = 0;
  *offset = 0;
  if (!isPeer(peer)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Shared& s = shared_[reg.handle];
  if (!shareLocked(comm, peer, reg, ptr, &s)) return;
  const uintptr_t p = (uintptr_t)ptr;
  if (s.sentTo[peer] != 1 || p < s.begin || p - s.begin >= s.bytes) return;
  *token = reg.handle;
  *offset = p - s.begin;
}

bool RegSharing::shareWithPeers(ncclComm* comm, const core::Registration& reg, const void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  Shared& s = shared_[reg.handle];
  bool all = true;
  for (int p = 0; p < comm->nRanks && all; ++p)
    if (isPeer(p)) all = shareLocked(comm, p, reg, ptr, &s) && s.sentTo[p] == 1;
  return all;
}

bool RegSharing::shareLocked(ncclComm* comm, int peer, const core::Registration& reg, const void* ptr, Shared* s) {
  if (s->sentTo.empty()) {  // a fresh entry
    s->shareable = true;
    s->sentTo.assign(comm->nRanks, 0);
  }
  if (!s->shareable) return false;
  if (s->sentTo[peer] != 0) return true;
  // Exported again for each peer: an fd kept per registration would hold one open file per
  // buffer PyTorch's allocator registers.
  runtime::UserMemExport ex;
  Status st = runtime::exportUserMem(ptr, reg.begin, reg.end, &ex);
  if (isError(st) || !ex.shareable) {
    s->shareable = false;
    WEFT_INFO(log::kReg,
              "rank %d: registration %#llx (buffer %p) cannot be shared for zero-copy receives: %s; "
              "its transfers take the connection buffers",
              rank_, (unsigned long long)reg.handle, ptr, isError(st) ? "the driver query failed" : ex.why);
    return false;
  }
  RegShareMsg m = message(RegShareKind::kShare, reg.handle);
  m.begin = ex.begin;
  m.bytes = ex.bytes;
  m.desc = ex.desc;
  s->begin = ex.begin;
  s->bytes = ex.bytes;
  st = endpoint_->sendMessage(peer, kRegShareTag, &m, sizeof(m), ex.fd.valid() ? ex.fd.get() : -1,
                              Clock::now() + kSendWithin, &comm->abortRequested);
  s->sentTo[peer] = isError(st) ? 2 : 1;
  if (!isError(st)) sharedAny_ = true;
  WEFT_INFO(log::kReg, "rank %d: %s registration %#llx ([%#llx, +%zu), %s) with %s for zero-copy receives", rank_,
            isError(st) ? "could not share" : "shared", (unsigned long long)reg.handle, (unsigned long long)ex.begin,
            ex.bytes, runtime::memKindName((runtime::MemKind)ex.desc.kind), peerName(comm, peer).c_str());
  return true;
}

void RegSharing::withdraw(ncclComm* comm, uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = shared_.find(token);
  if (it == shared_.end()) return;
  const RegShareMsg m = message(RegShareKind::kWithdraw, token);
  for (int p = 0; p < (int)it->second.sentTo.size(); ++p) {
    if (it->second.sentTo[p] != 1) continue;
    Status st = endpoint_->sendMessage(p, kRegShareTag, &m, sizeof(m), -1, Clock::now() + kSendWithin, nullptr);
    WEFT_INFO(log::kReg, "rank %d: %s registration %#llx from %s", rank_,
              isError(st) ? "could not withdraw (the peer is gone or stuck)" : "withdrew", (unsigned long long)token,
              peerName(comm, p).c_str());
  }
  shared_.erase(it);
}

Status RegSharing::absorb(ncclComm* comm, runtime::Stream stream, std::vector<std::pair<int, uint64_t>>* settled) {
  const uint64_t seen = endpoint_->messagesReceived();
  if (seen == messagesSeen_) return ncclSuccess;
  messagesSeen_ = seen;
  for (FdEndpoint::Message& m : endpoint_->takeMessages(kRegShareTagMask, kRegShareTag)) {
    RegShareMsg msg;
    const char* why = nullptr;
    if (m.fromRank >= comm->nRanks || peerIndex_[m.fromRank] < 0) {
      why = "a registration message from a rank this one has no connection with";
    } else {
      (void)checkRegShareMsg(m.payload.data(), m.payload.size(), m.fd.valid(), &msg, &why);
    }
    if (why != nullptr) {
      WEFT_WARN("rank %d: dropped %s (from rank %d)", rank_, why, m.fromRank);
      continue;
    }
    const std::pair<int, uint64_t> key{m.fromRank, msg.token};
    if (settled != nullptr && msg.kind == (uint32_t)RegShareKind::kShare) settled->push_back(key);
    if (msg.kind == (uint32_t)RegShareKind::kWithdraw) {
      unmappable_.erase(key);
      if (mapped_.count(key) != 0) {
        WEFT_TRY(unmap(m.fromRank, msg.token, stream));
      } else {
        withdrawnEarly_.insert(key);
      }
      continue;
    }
    if (withdrawnEarly_.erase(key) != 0 || mapped_.count(key) != 0) continue;
    Status st = map(comm, m.fromRank, msg, m.fd.get(), stream);
    if (mapped_.count(key) == 0) unmappable_.insert(key);  // failed, or no free slot
    if (isError(st)) {
      WEFT_INFO(log::kReg,
                "rank %d: could not map registration %#llx of %s; sends into it take the connection "
                "buffers",
                rank_, (unsigned long long)msg.token, peerName(comm, m.fromRank).c_str());
    }
  }
  return ncclSuccess;
}

Status RegSharing::awaitShares(ncclComm* comm, std::vector<std::pair<int, uint64_t>> expected,
                               std::chrono::steady_clock::time_point deadline) {
  // Shares taken before (an earlier receive or window shared the same registration) send nothing new.
  expected.erase(std::remove_if(expected.begin(), expected.end(),
                                [this](const auto& key) { return mapped_.count(key) || unmappable_.count(key); }),
                 expected.end());
  if (expected.empty()) return ncclSuccess;
  runtime::OwnedStream stream;
  WEFT_TRY(runtime::streamCreate(stream.out()));
  std::vector<std::pair<int, uint64_t>> settled;
  for (;;) {
    settled.clear();
    WEFT_TRY(absorb(comm, stream.get(), &settled));
    for (const auto& key : settled) expected.erase(std::remove(expected.begin(), expected.end(), key), expected.end());
    if (expected.empty() || Clock::now() >= deadline) break;
    endpoint_->syncPass();  // the shares were sent before the exchange: one pass reads them
  }
  for (const auto& [peer, token] : expected) {
    WEFT_INFO(log::kReg, "rank %d: the share of registration %#llx by %s has not come yet; it is mapped at a later "
              "launch", rank_, (unsigned long long)token, peerName(comm, peer).c_str());
  }
  return runtime::streamSynchronize(stream.get());  // the slots are written before any later launch
}

Status RegSharing::map(ncclComm* comm, int peer, const RegShareMsg& msg, int fd, runtime::Stream stream) {
  const size_t first = (size_t)peerIndex_[peer] * dev::kMaxPeerRegs;
  int slot = -1;
  for (int i = 0; i < dev::kMaxPeerRegs && slot < 0; ++i)
    if (hostSlots_[first + i].token == 0) slot = i;
  if (slot < 0) {
    WEFT_INFO(log::kReg, "rank %d: %s shared more than %d registrations with this rank; %#llx is not mapped", rank_,
              peerName(comm, peer).c_str(), dev::kMaxPeerRegs, (unsigned long long)msg.token);
    return ncclSuccess;
  }
  Mapped mp;
  uint64_t base = 0;
  // The same process by processHash (pid and pid namespace), not by pid alone: two containers can
  // each run a worker with the same pid, and the peer's address means nothing here.
  const bool sameProcess = comm->peers[peer].processHash == comm->peers[comm->rank].processHash;
  if (sameProcess && msg.desc.kind == (uint32_t)runtime::MemKind::kLegacyCudaIpc) {
    // CUDA cannot open its own process's IPC handles: the pointer itself, with peer access.
    WEFT_TRY(runtime::enablePeerAccess(comm->peers[peer].cudaDev));
    base = msg.begin;
  } else {
    const std::string from = peerName(comm, peer);
    WEFT_TRY(runtime::importMem(msg.desc, fd, &mp.mem, from.c_str()));
    base = (uint64_t)(uintptr_t)mp.mem.ptr();
  }
  mp.slot = slot;
  WEFT_TRY(writeSlot(peer, slot, dev::DevRegSlot{base, msg.bytes, msg.token}, stream));
  liveSlots_[peer]++;
  mapped_.emplace(std::make_pair(peer, msg.token), std::move(mp));
  WEFT_INFO(log::kReg, "rank %d: mapped registration %#llx of %s (%llu bytes) at %#llx for zero-copy sends", rank_,
            (unsigned long long)msg.token, peerName(comm, peer).c_str(), (unsigned long long)msg.bytes,
            (unsigned long long)base);
  return ncclSuccess;
}

Status RegSharing::unmap(int peer, uint64_t token, runtime::Stream stream) {
  auto it = mapped_.find({peer, token});
  WEFT_TRY(writeSlot(peer, it->second.slot, dev::DevRegSlot{}, stream));
  liveSlots_[peer]--;
  mapped_.erase(it);  // unmaps: no kernel writes there any more (the owner deregistered it after its transfers)
  WEFT_INFO(log::kReg, "rank %d: unmapped registration %#llx of rank %d (withdrawn)", rank_, (unsigned long long)token,
            peer);
  return ncclSuccess;
}

// Kernels may run on other streams while a slot changes: a live slot gets base and bytes before
// its token, a cleared one loses its token first (DevRegSlot), each copy after the one before on
// the stream. Host-to-device copies from pageable memory take their bytes before they return.
Status RegSharing::writeSlot(int peer, int slot, const dev::DevRegSlot& value, runtime::Stream stream) {
  const size_t i = (size_t)peerIndex_[peer] * dev::kMaxPeerRegs + (size_t)slot;
  dev::DevRegSlot& host = hostSlots_[i];
  dev::DevRegSlot* device = deviceSlots_ + i;
  host = value;
  if (value.token != 0) WEFT_TRY(runtime::deviceMemcpyAsync(device, &host, offsetof(dev::DevRegSlot, token), stream));
  return runtime::deviceMemcpyAsync(&device->token, &host.token, sizeof(host.token), stream);
}

}  // namespace weft::transport::p2p
