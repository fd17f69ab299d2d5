#include "core/dev_window.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/communicator.h"
#include "core/log.h"
#include "core/param.h"
#include "runtime/block_pool.h"
#include "runtime/gpu.h"
#include "runtime/ipc_mem.h"
#include "transport/p2p/p2p_connections.h"

namespace weft::core {
namespace {

constexpr size_t k4G = size_t(1) << 32;
// The tag of the fds a flat window's members send each other (top byte 'F'), per window.
constexpr uint64_t kFlatTag = 0x46ull << 56;
const param::IntParam kFlatTimeout{"NCCL_BOOTSTRAP_TIMEOUT", 300};

}  // namespace

LsaTeam lsaTeamOf(const std::vector<uint64_t>& hostHashes, int rank) {
  LsaTeam team;
  team.firstWorldRank = rank;
  const int n = (int)hostHashes.size();
  int first = rank, last = rank;
  while (first > 0 && hostHashes[first - 1] == hostHashes[rank]) --first;
  while (last + 1 < n && hostHashes[last + 1] == hostHashes[rank]) ++last;
  int members = 0;
  for (uint64_t h : hostHashes) members += h == hostHashes[rank];
  if (members != last - first + 1) return team;  // the host's ranks are not consecutive: alone
  team.rank = rank - first;
  team.size = members;
  team.firstWorldRank = first;
  return team;
}

FlatPlan planFlat(const std::vector<FlatPart>& parts, size_t granularity) {
  FlatPlan plan;
  if (parts.empty() || granularity == 0) {
    plan.why = "no members";
    return plan;
  }
  uint64_t lead = 0;
  for (const FlatPart& p : parts) {
    if (!p.capable) {
      plan.why = "a member's buffer is not cuMem memory exported as a file descriptor (use ncclMemAlloc)";
      return plan;
    }
    if (p.allocBytes == 0 || p.allocBytes % granularity != 0 || p.offset >= p.allocBytes) {
      plan.why = "a member's allocation is not a whole number of granules";
      return plan;
    }
    if (p.offset % granularity != parts[0].offset % granularity) {
      plan.why = "the members' buffers start at different places in their allocations (modulo the granularity)";
      return plan;
    }
    lead = std::max(lead, p.offset);
  }
  uint64_t need = 0;
  for (const FlatPart& p : parts) need = std::max(need, lead - p.offset + p.allocBytes);
  plan.ok = true;
  plan.lead = (size_t)lead;
  plan.stride = (size_t)((need + k4G - 1) / k4G * k4G);
  return plan;
}

FlatWindow::~FlatWindow() {
  runtime::deviceBlockRelease(device_);
}

Status FlatWindow::create(ncclComm* comm, const LsaTeam& team, const std::vector<FlatPart>& parts, const FlatPlan& plan,
                          const void* buff, uint64_t sequence, std::unique_ptr<FlatWindow>* out) {
  std::unique_ptr<FlatWindow> self(new FlatWindow());
  runtime::UserMemExport ex;
  WEFT_TRY(runtime::exportUserMem(buff, (uintptr_t)buff, (uintptr_t)buff + 1, &ex));
  if (!ex.shareable || ex.desc.kind != (uint32_t)runtime::MemKind::kCuMemFd) {
    WEFT_WARN("rank %d: its window buffer %p could not be exported for the device API's flat mapping", comm->rank,
              buff);
    return ncclInternalError;
  }
  transport::p2p::FdEndpoint* endpoint = comm->p2p ? comm->p2p->endpoint() : nullptr;
  if (team.size > 1 && endpoint == nullptr) {
    WEFT_WARN("rank %d: no fd endpoint to share its window with the ranks of its host", comm->rank);
    return ncclInternalError;
  }
  const uint64_t tag = kFlatTag | (sequence & ((1ull << 56) - 1));
  const int64_t seconds = kFlatTimeout.get();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds > 0 ? seconds : 1 << 30);
  // Every member gets the fd even when one send fails, so that no other member waits for it in vain.
  Status sent = ncclSuccess;
  for (int m = 0; m < team.size; ++m) {
    if (m == team.rank) continue;
    Status s = endpoint->sendFd(team.firstWorldRank + m, ex.fd.get(), tag, deadline, &comm->abortRequested);
    if (isError(s) && !isError(sent)) sent = s;
  }
  WEFT_TRY(sent);
  WEFT_TRY(self->mapping_.reserve(team.size, plan.stride));
  const FlatPart& mine = parts[team.rank];
  WEFT_TRY(self->mapping_.mapOwn(team.rank, plan.lead - mine.offset, (const char*)buff - mine.offset, mine.allocBytes));
  for (int m = 0; m < team.size; ++m) {
    if (m == team.rank) continue;
    const int peer = team.firstWorldRank + m;
    util::UniqueFd fd;
    WEFT_TRY(endpoint->recvFd(peer, tag, deadline, &comm->abortRequested, &fd));
    const std::string from = "rank " + std::to_string(peer);
    WEFT_TRY(self->mapping_.mapFd(m, plan.lead - parts[m].offset, fd.get(), parts[m].allocBytes, from.c_str()));
  }
  self->team_ = team;
  WindowVidmem& host = self->host_;
  host.winHost = self.get();
  host.lsaFlatBase = self->mapping_.base() + plan.lead;
  host.lsaRank = team.rank;
  host.worldRank = comm->rank;
  host.stride4G = (uint32_t)(plan.stride / k4G);
  void* dev = nullptr;
  WEFT_TRY(runtime::deviceBlockAcquire(sizeof(host), &dev));
  self->device_ = static_cast<WindowVidmem*>(dev);
  WEFT_TRY(runtime::deviceMemcpy(dev, &host, sizeof(host)));
  WEFT_INFO(log::kReg,
            "rank %d: window %p mapped flat for the device API: %d rank(s) of this host, %zu GiB apart, "
            "buffers %zu bytes into their slots",
            comm->rank, dev, team.size, plan.stride / k4G, plan.lead);
  *out = std::move(self);
  return ncclSuccess;
}

}  // namespace weft::core
