#include "core/comm_window.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "core/comm_checks.h"
#include "core/comm_register.h"
#include "core/communicator.h"
#include "core/log.h"
#include "core/peer_info.h"
#include "core/registrations.h"
#include "core/symmetric.h"
#include "enqueue/group.h"
#include "runtime/block_pool.h"
#include "runtime/gpu.h"
#include "runtime/ipc_mem.h"
#include "transport/p2p/p2p_connections.h"

namespace weft::core {
namespace {

constexpr const char* kRegisterFn = "ncclCommWindowRegister";
constexpr const char* kDeregisterFn = "ncclCommWindowDeregister";

// Window handles: process-unique tokens, never reused, non-canonical addresses ("ww").
constexpr uint64_t kWindowTag = 0x7777ull << 48;
std::atomic<uint64_t> gNextWindow{1};

// The peers' shares were sent before they entered the exchange; reading them takes one endpoint
// pass. A share still missing after this is mapped at a later launch instead.
constexpr auto kAwaitShares = std::chrono::seconds(2);

// "ranks 1, 3" (at most 8 named, then how many more).
std::string rankList(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) text += " and " + std::to_string(ranks.size() - 8) + " more";
  return text;
}

// This rank's part, up to the exchange: checks, registers, shares. Returns the local failure.
Status prepareWindow(ncclComm* comm, void* buff, size_t size, void** win, WindowRecord* mine, void** registration) {
  *registration = nullptr;
  if (win == nullptr) {
    WEFT_WARN("%s: argument 'win' is NULL (rank %d still took part, so that the other ranks fail too)", kRegisterFn,
              comm->rank);
    return ncclInvalidArgument;
  }
  if (buff == nullptr || size == 0) {
    mine->part = (uint32_t)WindowPart::kNone;
    WEFT_INFO(log::kReg, "%s: rank %d: buff %p, size %zu: no window on this rank (NULL handle)", kRegisterFn,
              comm->rank, buff, size);
    return ncclSuccess;
  }
  WEFT_TRY(registerBuffer(comm, buff, size, registration, kRegisterFn));
  mine->part = (uint32_t)WindowPart::kBuffer;
  mine->token = (uint64_t)(uintptr_t)*registration;
  mine->bytes = size;
  transport::p2p::RegSharing* sharing = comm->p2p ? comm->p2p->sharing() : nullptr;
  Registration reg;
  if (*registration != nullptr && sharing != nullptr && comm->registrations->find(*registration, &reg))
    mine->sharedWithAll = sharing->shareWithPeers(comm, reg, buff) ? 1 : 0;
  // Can the device API map it flat? Not on a stand-in communicator (no GPU), nor where a peer is reached
  // through host shared memory (no peer access): the record says so, so every rank sees the window
  // cannot be flat.
  runtime::UserMemExport ex;
  const bool shmPeer = std::count(comm->shmPeers.begin(), comm->shmPeers.end(), true) > 0;
  if (comm->cudaDev >= 0 && !shmPeer &&
      !isError(runtime::exportUserMem(buff, (uintptr_t)buff, (uintptr_t)buff + 1, &ex)) &&
      ex.shareable && ex.desc.kind == (uint32_t)runtime::MemKind::kCuMemFd) {
    mine->flatCapable = 1;
    mine->allocBytes = ex.desc.allocBytes;
    mine->allocOffset = ex.desc.offset;
  }
  return ncclSuccess;
}

// The device API's flat mapping, when every rank of this host registered cuMem memory. Null
// (and success) when the window cannot be flat: it then works for everything but device code.
Status flatWindowOf(ncclComm* comm, const std::vector<WindowRecord>& all, const void* buff,
                    std::shared_ptr<FlatWindow>* out) {
  std::vector<uint64_t> hosts;
  for (const PeerInfo& p : comm->peers) hosts.push_back(p.hostHash);
  const LsaTeam team = (int)hosts.size() == comm->nRanks ? lsaTeamOf(hosts, comm->rank) : LsaTeam{0, 1, comm->rank};
  std::vector<FlatPart> parts;
  for (int m = 0; m < team.size; ++m) {
    const WindowRecord& r = all[team.firstWorldRank + m];
    parts.push_back({r.part == (uint32_t)WindowPart::kBuffer && r.flatCapable == 1, r.allocBytes, r.allocOffset});
  }
  size_t gran = 0;
  if (!parts[team.rank].capable || isError(runtime::FlatMapping::granularity(&gran))) return ncclSuccess;
  const FlatPlan plan = planFlat(parts, gran);
  if (!plan.ok) {
    WEFT_INFO(log::kReg, "%s: rank %d: no device-API pointers for this window: %s", kRegisterFn, comm->rank, plan.why);
    return ncclSuccess;
  }
  std::unique_ptr<FlatWindow> flat;
  WEFT_TRY(FlatWindow::create(comm, team, parts, plan, buff, all[comm->rank].sequence, &flat));
  *out = std::move(flat);
  return ncclSuccess;
}

}  // namespace

Status registerWindowNow(ncclComm* comm, void* buff, size_t size, void** win, int winFlags, Status forcedFailure) {
  runtime::MemTallyScope charged(comm->memTally, runtime::MemUse::kWindows,
                                 comm->memoryLabel() + ": " + kRegisterFn);
  WindowRecord mine;
  mine.sequence = comm->windows->registered();
  void* registration = nullptr;
  const Status local =
      isError(forcedFailure) ? forcedFailure : prepareWindow(comm, buff, size, win, &mine, &registration);
  const std::string failure = isError(local) ? log::lastErrorOfThread() : "";
  if (isError(local)) mine.part = (uint32_t)WindowPart::kFailed;
  std::vector<WindowRecord> all;
  const Status agreed = agreeOnWindow(comm->bootstrap.get(), comm->rank, comm->nRanks, mine, &all);
  comm->windows->countRegistration();
  if (isError(local) && std::string(log::lastErrorOfThread()) != failure) {
    WEFT_WARN("%s", failure.c_str());  // this rank's own failure is what its caller needs to read last
  }
  if (isError(local) || isError(agreed)) {
    if (registration != nullptr) (void)deregisterBuffer(comm, registration, kRegisterFn);  // withdraws the shares
    comm->setLastError(log::lastErrorOfThread());  // ncclGetLastError(comm), also from ncclGroupEnd's thread
    return isError(local) ? local : agreed;
  }
  // With NCCL_WIN_COLL_SYMMETRIC every rank that got here votes on symmetric collectives (once a
  // communicator has them, never again): a rank without a flat window says no.
  const bool symmetric = (winFlags & NCCL_WIN_COLL_SYMMETRIC) != 0;
  if (mine.part == (uint32_t)WindowPart::kNone) {
    if (symmetric) enableSymmetric(comm, false);
    return ncclSuccess;
  }

  transport::p2p::RegSharing* sharing = comm->p2p ? comm->p2p->sharing() : nullptr;
  if (sharing != nullptr) {
    std::vector<std::pair<int, uint64_t>> expected;
    for (int p = 0; p < comm->nRanks; ++p) {
      const WindowRecord& r = all[p];
      if (p != comm->rank && r.part == (uint32_t)WindowPart::kBuffer && r.sharedWithAll && r.token != 0 &&
          sharing->isPeer(p))
        expected.emplace_back(p, r.token);
    }
    Status s = sharing->awaitShares(comm, std::move(expected), std::chrono::steady_clock::now() + kAwaitShares);
    if (isError(s))
      WEFT_INFO(log::kReg,
                "%s: rank %d: mapping the peers' windows failed; sends take the connection "
                "buffers",
                kRegisterFn, comm->rank);
  }
  WindowTable::Window w;
  w.registration = registration;
  w.buff = (uintptr_t)buff;
  w.bytes = size;
  w.flags = winFlags;
  Status flat = flatWindowOf(comm, all, buff, &w.flat);
  if (isError(flat)) {
    WEFT_WARN(
        "%s: rank %d: the window could not be mapped for the device API (see the warning before); no window "
        "was made on this rank",
        kRegisterFn, comm->rank);
    if (registration != nullptr) (void)deregisterBuffer(comm, registration, kRegisterFn);
    comm->setLastError(log::lastErrorOfThread());
    if (symmetric) enableSymmetric(comm, false);
    return flat;
  }
  *win = comm->windows->add(w, w.flat ? (void*)w.flat->device() : nullptr);
  if (symmetric) enableSymmetric(comm, w.flat && w.flat->team().size == comm->nRanks);
  WEFT_INFO(log::kReg, "%s: rank %d: buff %p (%zu bytes, flags %#x) -> window %p (registration %p, %s, %s)",
            kRegisterFn, comm->rank, buff, size, (unsigned)winFlags, *win, registration,
            mine.sharedWithAll ? "shared with every peer of this host" : "not shared",
            w.flat ? "mapped flat for the device API" : "no device-API pointers");
  return ncclSuccess;
}

Status agreeOnWindow(bootstrap::Bootstrap* bootstrap, int rank, int nRanks, const WindowRecord& mine,
                     std::vector<WindowRecord>* all) {
  all->assign((size_t)nRanks, WindowRecord{});
  (*all)[rank] = mine;
  if (nRanks > 1) {
    if (bootstrap == nullptr) {
      WEFT_WARN("%s: rank %d of %d has no bootstrap to reach the others", kRegisterFn, rank, nRanks);
      return ncclInternalError;
    }
    Status s = bootstrap->allGather(all->data(), sizeof(WindowRecord));
    if (isError(s)) {
      const std::string cause = log::lastErrorOfThread();
      WEFT_WARN("%s: rank %d: the ranks could not exchange their windows (%s); no window was made", kRegisterFn, rank,
                cause.c_str());
      return s;
    }
  }
  std::vector<int> malformed, failed, behind;
  for (int p = 0; p < nRanks; ++p) {
    const WindowRecord& r = (*all)[p];
    const bool partOk = r.part >= (uint32_t)WindowPart::kBuffer && r.part <= (uint32_t)WindowPart::kFailed;
    if (r.magic != kWindowRecordMagic || !partOk || r.sharedWithAll > 1 || r.flatCapable > 1) {
      malformed.push_back(p);
    } else if (r.part == (uint32_t)WindowPart::kFailed) {
      failed.push_back(p);
    } else if (r.sequence != mine.sequence) {
      behind.push_back(p);
    }
  }
  if (!malformed.empty()) {
    WEFT_WARN("%s: rank %d received a malformed window record from %s; no window was made", kRegisterFn, rank,
              rankList(malformed).c_str());
    return ncclInternalError;
  }
  if (!failed.empty()) {
    WEFT_WARN("%s: the call failed on %s (see its log: a bad argument or buffer); no rank made the window", kRegisterFn,
              rankList(failed).c_str());
    return ncclInvalidUsage;
  }
  if (!behind.empty()) {
    WEFT_WARN(
        "%s: %s registered a different number of windows on this communicator before this call than rank %d "
        "(%llu): the ranks' ncclCommWindowRegister calls do not pair up; no window was made",
        kRegisterFn, rankList(behind).c_str(), rank, (unsigned long long)mine.sequence);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

void* WindowTable::add(const Window& w, void* handle) {
  const uint64_t key = handle != nullptr ? (uint64_t)(uintptr_t)handle
                                         : kWindowTag | gNextWindow.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  windows_[key] = w;
  if (w.flat && isError(writeDeviceTableLocked())) WEFT_WARN("the device API's window table was not updated");
  return (void*)(uintptr_t)key;
}

bool WindowTable::remove(const void* handle, Window* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = windows_.find((uint64_t)(uintptr_t)handle);
  if (it == windows_.end()) return false;
  *out = it->second;
  windows_.erase(it);
  if (out->flat && isError(writeDeviceTableLocked())) WEFT_WARN("the device API's window table was not updated");
  return true;
}

void WindowTable::keep(const void* handle, std::shared_ptr<void> memory) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = windows_.find((uint64_t)(uintptr_t)handle);
  if (it != windows_.end()) it->second.owned = std::move(memory);
}

std::shared_ptr<FlatWindow> WindowTable::flatOf(const void* handle) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = windows_.find((uint64_t)(uintptr_t)handle);
  return it == windows_.end() ? nullptr : it->second.flat;
}

bool WindowTable::symmetricSpan(uintptr_t p, size_t bytes, int teamSize, uintptr_t* flat0, uint32_t* stride4G) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, w] : windows_) {
    if (!w.flat || !(w.flags & NCCL_WIN_COLL_SYMMETRIC) || w.flat->team().size != teamSize) continue;
    if (p < w.buff || bytes > w.bytes || p - w.buff > w.bytes - bytes) continue;
    *flat0 = (uintptr_t)w.flat->host().lsaFlatBase + (p - w.buff);
    *stride4G = w.flat->host().stride4G;
    return true;
  }
  return false;
}

Status WindowTable::deviceTable(DevWindowTable** out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (deviceTable_ == nullptr) {
    void* table = nullptr;
    WEFT_TRY(runtime::deviceBlockAcquire(sizeof(DevWindowTable), &table));
    deviceTable_ = static_cast<DevWindowTable*>(table);
    WEFT_TRY(writeDeviceTableLocked());
  }
  *out = deviceTable_;
  return ncclSuccess;
}

// Kernels may search the table while it changes (a window registered while a device-API kernel
// runs): entries are written whole, in one copy; a window being deregistered must not be in use.
Status WindowTable::writeDeviceTableLocked() {
  if (deviceTable_ == nullptr) return ncclSuccess;
  DevWindowTable host{};
  int n = 0;
  for (const auto& [key, w] : windows_) {
    if (!w.flat) continue;
    if (n == 32) {
      WEFT_INFO(log::kReg, "more than 32 windows mapped for the device API: ncclFindWindow finds the first 32");
      break;
    }
    host.entries[n++] = {w.buff, w.bytes, (void*)(uintptr_t)key};
  }
  return runtime::deviceMemcpy(deviceTable_, &host, sizeof(host));
}

WindowTable::~WindowTable() {
  runtime::deviceBlockRelease(deviceTable_);
}

size_t WindowTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return windows_.size();
}

uint64_t WindowTable::registered() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return registered_;
}

void WindowTable::countRegistration() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++registered_;
}

Status registerWindow(ncclComm* comm, void* buff, size_t size, void** win, int winFlags) {
  WEFT_TRY(checkCommUsable(comm, kRegisterFn));
  if (win != nullptr) *win = nullptr;
  if ((winFlags & ~NCCL_WIN_COLL_SYMMETRIC) != 0)
    WEFT_INFO(log::kReg, "%s: winFlags %#x has bits this version does not know; they are ignored", kRegisterFn,
              (unsigned)winFlags);
  auto job = [comm, buff, size, win, winFlags]() -> Status {
    runtime::ScopedDevice device;
    if (comm->cudaDev >= 0) WEFT_TRY(device.set(comm->cudaDev));  // (a stand-in communicator in tests has none)
    return registerWindowNow(comm, buff, size, win, winFlags, ncclSuccess);
  };
  // Inside a group every communicator's exchanges run at ncclGroupEnd, side by side: one thread
  // may drive several ranks of one communicator (*win is filled then, as NCCL documents). One
  // communicator's run in call order, one at a time (they share its bootstrap).
  if (enqueue::inGroup()) {
    enqueue::deferInOrder(job, comm);
    return ncclSuccess;
  }
  return job();
}

Status deregisterWindow(ncclComm* comm, void* win) {
  WEFT_TRY(checkCommHandle(comm, kDeregisterFn));
  if (win == nullptr) return ncclSuccess;  // what ncclCommWindowRegister gives for a NULL buffer
  WindowTable::Window w;
  if (!comm->windows->remove(win, &w)) {
    WEFT_WARN(
        "%s: win %p is not a window of this communicator (rank %d): it was deregistered already, made by "
        "another communicator, or never came from ncclCommWindowRegister",
        kDeregisterFn, win, comm->rank);
    return ncclInvalidUsage;
  }
  if (w.registration != nullptr) WEFT_TRY(deregisterBuffer(comm, w.registration, kDeregisterFn));
  WEFT_INFO(log::kReg, "%s: rank %d: window %p (buff %#llx, %zu bytes) released", kDeregisterFn, comm->rank, win,
            (unsigned long long)w.buff, w.bytes);
  return ncclSuccess;
}

}  // namespace weft::core
