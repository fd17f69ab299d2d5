#include "core/dev_comm.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/comm_checks.h"
#include "core/comm_window.h"
#include "core/communicator.h"
#include "core/log.h"
#include "core/peer_info.h"
#include "enqueue/group.h"
#include "runtime/gpu.h"
#include "runtime/mem_alloc.h"

namespace weft::core {
namespace {

constexpr const char* kCreateFn = "ncclDevCommCreate";
constexpr size_t kUnit = 128;              // resource handles count 128-byte units (NCCL's)
constexpr int kMaxRequirements = 1 << 16;  // a longer list is a cycle

size_t alignUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

LsaTeam lsaTeamOfComm(const ncclComm* comm) {
  std::vector<uint64_t> hosts;
  for (const PeerInfo& p : comm->peers) hosts.push_back(p.hostHash);
  if ((int)hosts.size() != comm->nRanks || comm->rank < 0) return LsaTeam{0, 1, comm->rank};
  return lsaTeamOf(hosts, comm->rank);
}

bool oneHost(const ncclComm* comm) { return lsaTeamOfComm(comm).size == comm->nRanks; }

// What weft does not provide, named; ncclSuccess when `r` asks only for what it does.
Status checkSupported(const ncclComm* comm, const DevCommRequirements& r) {
  const char* field = nullptr;
  if (r.lsaMultimem)
    field = "lsaMultimem (NVLink multicast, which weft never uses)";
  else if (r.railGinBarrierCount != 0)
    field = "railGinBarrierCount (the network, GIN)";
  else if (r.ginForceEnable || r.ginSignalCount != 0 || r.ginCounterCount != 0)
    field = "gin* (the network, GIN)";
  else if (r.barrierCount != 0 && !oneHost(comm))
    field = "barrierCount across hosts (the network, GIN)";
  int n = 0;
  for (const DevTeamRequirement* t = r.teamRequirementsList; t != nullptr && field == nullptr; t = t->next)
    if (t->multimem || ++n > kMaxRequirements) field = "teamRequirementsList (multimem)";
  n = 0;
  for (const DevResourceRequirement* q = r.resourceRequirementsList; q != nullptr && field == nullptr; q = q->next) {
    if (q->ginSignalCount != 0 || q->ginCounterCount != 0)
      field = "a resource requirement's GIN signals or counters";
    else if (++n > kMaxRequirements)
      field = "resourceRequirementsList (it loops)";
    else if (q->bufferAlign != 0 && (q->bufferAlign & (q->bufferAlign - 1)) != 0)
      field = "a resource requirement's bufferAlign (not a power of 2)";
  }
  if (field == nullptr) return ncclSuccess;
  WEFT_WARN("%s: rank %d: the requirements ask for %s, which weft does not provide", kCreateFn, comm->rank, field);
  return ncclInvalidUsage;
}

// Where each requirement's buffer goes in the resource window, and the built-in LSA barriers.
struct ResourceLayout {
  std::vector<std::pair<const DevResourceRequirement*, size_t>> places;
  size_t barrierAt = 0;
  int barriers = 0;
  size_t bytes = 0;
};
ResourceLayout layoutOf(const DevCommRequirements& r, int lsaSize, bool oneHostComm) {
  ResourceLayout l;
  size_t at = 0;
  for (const DevResourceRequirement* q = r.resourceRequirementsList; q != nullptr; q = q->next) {
    at = alignUp(at, std::max<size_t>(kUnit, q->bufferAlign));
    l.places.emplace_back(q, at);
    at += q->bufferSize;
  }
  l.barriers = std::max(r.lsaBarrierCount, oneHostComm ? r.barrierCount : 0);
  at = alignUp(at, kUnit);
  l.barrierAt = at;
  at += lsaBarrierBytes(l.barriers, lsaSize);
  l.bytes = alignUp(std::max<size_t>(at, kUnit), kUnit);
  if (r.lsaLLA2ABlockCount != 0 || r.lsaLLA2ASlotCount != 0)  // ncclDevComm has no field that would name it
    WEFT_INFO(log::kReg,
              "%s: lsaLLA2A* asks for an all-to-all buffer no ncclDevComm field names; use "
              "ncclLLA2ACreateRequirement",
              kCreateFn);
  return l;
}

Status createNow(ncclComm* comm, const DevCommRequirements* reqs, DevCommAbi* out) {
  runtime::MemTallyScope charged(comm->memTally, runtime::MemUse::kWindows,
                                 comm->memoryLabel() + ": " + kCreateFn);
  Status local = ncclSuccess;
  if (reqs == nullptr || out == nullptr) {
    WEFT_WARN("%s: argument '%s' is NULL (rank %d still took part, so that the other ranks fail too)", kCreateFn,
              reqs == nullptr ? "reqs" : "outDevComm", comm->rank);
    local = ncclInvalidArgument;
  }
  if (!isError(local)) local = checkSupported(comm, *reqs);
  const LsaTeam team = lsaTeamOfComm(comm);
  ResourceLayout layout;
  void* memory = nullptr;
  if (!isError(local)) {
    layout = layoutOf(*reqs, team.size, oneHost(comm));
    local = runtime::memAlloc(&memory, layout.bytes);
    if (!isError(local)) local = runtime::deviceMemset(memory, 0, layout.bytes);
  }
  std::shared_ptr<void> owned(memory, [](void* p) {
    if (p != nullptr) (void)runtime::memFree(p);
  });
  void* win = nullptr;
  WEFT_TRY(registerWindowNow(comm, memory, layout.bytes, &win, 0, local));  // every rank learns of a failure
  std::shared_ptr<FlatWindow> flat = comm->windows->flatOf(win);
  DevWindowTable* table = nullptr;
  Status s = flat ? comm->windows->deviceTable(&table) : ncclInvalidUsage;
  if (isError(s)) {
    if (!flat)
      WEFT_WARN(
          "%s: rank %d: the device communicator's memory could not be mapped flat: the device API needs cuMem "
          "memory (is NCCL_CUMEM_ENABLE=0 set?)",
          kCreateFn, comm->rank);
    (void)deregisterWindow(comm, win);
    return s;
  }
  comm->windows->keep(win, std::move(owned));  // freed with the window
  for (const auto& [req, at] : layout.places)
    if (req->outBufferHandle != nullptr) *req->outBufferHandle = (uint32_t)(at / kUnit);
  std::memset(out, 0, sizeof(*out));
  out->rank = comm->rank;
  out->nRanks = comm->nRanks;
  out->nRanksRcp32 = divisionReciprocal((uint32_t)comm->nRanks);
  out->lsaRank = flat->team().rank;
  out->lsaSize = flat->team().size;
  out->lsaSizeRcp32 = divisionReciprocal((uint32_t)out->lsaSize);
  out->windowTable = table;
  out->resourceWindow = flat->device();
  out->resourceWindowInlined = flat->host();
  out->lsaBarrier = {(uint32_t)(layout.barrierAt / kUnit), layout.barriers};
  WEFT_INFO(log::kReg, "%s: rank %d: LSA team %d of %d, %zu resource bytes, %d LSA barrier(s), window %p", kCreateFn,
            comm->rank, out->lsaRank, out->lsaSize, layout.bytes, layout.barriers, win);
  return ncclSuccess;
}

}  // namespace

size_t lla2aBytes(int nBlocks, int nSlots) {
  return nBlocks <= 0 || nSlots < 0 ? 0 : (size_t)16 * (size_t)nBlocks * (1 + 2 * (size_t)nSlots);
}

int lla2aCalcSlots(int maxElts, int maxEltSize) {
  if (maxElts <= 0 || maxEltSize <= 0 || (int64_t)maxElts * ((maxEltSize + 7) / 8) > INT32_MAX) {
    WEFT_WARN("ncclLLA2ACalcSlots: %d elements of %d bytes make no sense; 0 slots", maxElts, maxEltSize);
    return 0;
  }
  return maxElts * ((maxEltSize + 7) / 8);
}

Status lla2aCreateRequirement(int nBlocks, int nSlots, LLA2AHandle* outHandle, DevResourceRequirement* outReq) {
  constexpr const char* fn = "ncclLLA2ACreateRequirement";
  WEFT_CHECK_ARG(outHandle != nullptr && outReq != nullptr, "%s: argument '%s' is NULL", fn,
                 outHandle == nullptr ? "outHandle" : "outReq");
  WEFT_CHECK_ARG(nBlocks > 0 && nSlots > 0 && (uint64_t)nBlocks * (1 + 2 * (uint64_t)nSlots) < (1ull << 36),
                 "%s: %d blocks of %d slots make no sense", fn, nBlocks, nSlots);
  std::memset(outReq, 0, sizeof(*outReq));
  outReq->bufferSize = lla2aBytes(nBlocks, nSlots);
  outReq->bufferAlign = kUnit;
  outReq->outBufferHandle = &outHandle->bufHandle;
  outHandle->bufHandle = 0;
  outHandle->nSlots = (uint32_t)nSlots;
  return ncclSuccess;
}

size_t lsaBarrierBytes(int nBarriers, int teamRanks) {
  return nBarriers <= 0 ? 0 : sizeof(uint32_t) * (size_t)nBarriers * (3 + (size_t)std::max(teamRanks, 1));
}

DevTeam teamWorld(const ncclComm* comm) { return {comm->nRanks, comm->rank, 1}; }

DevTeam teamLsa(const ncclComm* comm) {
  const LsaTeam t = lsaTeamOfComm(comm);
  return {t.size, t.rank, 1};
}

DevTeam teamRail(const ncclComm* comm) {
  const int lsa = lsaTeamOfComm(comm).size;
  return {comm->nRanks / lsa, comm->rank / lsa, lsa};
}

Status lsaBarrierCreateRequirement(DevTeam team, int nBarriers, LsaBarrierHandle* outHandle,
                                   DevResourceRequirement* outReq) {
  constexpr const char* fn = "ncclLsaBarrierCreateRequirement";
  WEFT_CHECK_ARG(outHandle != nullptr && outReq != nullptr, "%s: argument '%s' is NULL", fn,
                 outHandle == nullptr ? "outHandle" : "outReq");
  WEFT_CHECK_ARG(nBarriers >= 0 && team.nRanks >= 1 && team.rank >= 0 && team.rank < team.nRanks,
                 "%s: %d barriers over a team of %d ranks (this one %d) make no sense", fn, nBarriers, team.nRanks,
                 team.rank);
  std::memset(outReq, 0, sizeof(*outReq));
  outReq->bufferSize = lsaBarrierBytes(nBarriers, team.nRanks);
  outReq->bufferAlign = kUnit;
  outReq->outBufferHandle = &outHandle->bufHandle;
  outHandle->bufHandle = 0;
  outHandle->nBarriers = nBarriers;
  return ncclSuccess;
}

Status devCommCreate(ncclComm* comm, const DevCommRequirements* reqs, DevCommAbi* out) {
  WEFT_TRY(checkCommUsable(comm, kCreateFn));
  auto job = [comm, reqs, out]() -> Status {
    runtime::ScopedDevice device;
    if (comm->cudaDev >= 0) WEFT_TRY(device.set(comm->cudaDev));
    const Status s = createNow(comm, reqs, out);
    if (isError(s)) comm->setLastError(log::lastErrorOfThread());  // also read from ncclGroupEnd's thread
    return s;
  };
  if (enqueue::inGroup()) {  // as window registrations: at ncclGroupEnd, one communicator's in order
    enqueue::deferInOrder(job, comm);
    return ncclSuccess;
  }
  return job();
}

Status devCommDestroy(ncclComm* comm, const DevCommAbi* devComm) {
  constexpr const char* fn = "ncclDevCommDestroy";
  WEFT_TRY(checkCommHandle(comm, fn));
  WEFT_CHECK_ARG(devComm != nullptr, "%s: argument 'devComm' is NULL", fn);
  if (!comm->windows->flatOf(devComm->resourceWindow)) {
    WEFT_WARN("%s: devComm %p is not a device communicator of this communicator (rank %d), or was destroyed already",
              fn, (const void*)devComm, comm->rank);
    return ncclInvalidUsage;
  }
  return deregisterWindow(comm, devComm->resourceWindow);
}

}  // namespace weft::core
