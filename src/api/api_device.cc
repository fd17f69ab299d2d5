// The host entry points of NCCL's device API (nccl_device.h, NCCL 2.28): core/dev_comm.h. The GIN
// barrier (the network) is not provided: it returns ncclInvalidUsage.
#include "api/export.h"
#include "core/comm_checks.h"
#include "core/communicator.h"
#include "core/dev_comm.h"

using weft::api::notImplemented;
using weft::core::DevCommAbi;
using weft::core::DevCommRequirements;
using weft::core::DevResourceRequirement;
using weft::core::DevTeam;
using weft::core::LLA2AHandle;
using weft::core::LsaBarrierHandle;

namespace {
constexpr const char* kNoNetwork = "the device API's network part (GIN) needs a network transport, which weft lacks";

// The team calls cannot return an error: an unusable communicator gets an empty team and a warning.
bool usable(ncclComm_t comm, const char* fn) { return weft::core::checkCommHandle(comm, fn) == ncclSuccess; }
}  // namespace

// Only pointers to these cross the ABI; weft reads them as the core/dev_comm.h layouts.
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;
// Returned by value: three ints, as in nccl_device/core.h.
struct ncclTeam { int nRanks, rank, stride; };

namespace {
ncclTeam toAbi(DevTeam t) { return ncclTeam{t.nRanks, t.rank, t.stride}; }
}  // namespace

WEFT_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements* reqs, ncclDevComm* out) {
  return weft::api::guard("ncclDevCommCreate", [&]() -> ncclResult_t {
    return weft::core::devCommCreate(comm, reinterpret_cast<const DevCommRequirements*>(reqs),
                                     reinterpret_cast<DevCommAbi*>(out));
  });
}
WEFT_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm* devComm) {
  return weft::api::guard("ncclDevCommDestroy", [&]() -> ncclResult_t {
    return weft::core::devCommDestroy(comm, reinterpret_cast<const DevCommAbi*>(devComm));
  });
}
WEFT_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam team, int nBarriers, ncclLsaBarrierHandle* outHandle,
         ncclDevResourceRequirements* outReq) {
  return weft::api::guard("ncclLsaBarrierCreateRequirement", [&]() -> ncclResult_t {
    return weft::core::lsaBarrierCreateRequirement(DevTeam{team.nRanks, team.rank, team.stride}, nBarriers,
                                                   reinterpret_cast<LsaBarrierHandle*>(outHandle),
                                                   reinterpret_cast<DevResourceRequirement*>(outReq));
  });
}
WEFT_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t, ncclTeam, int, ncclGinBarrierHandle*,
         ncclDevResourceRequirements*) {
  return notImplemented("ncclGinBarrierCreateRequirement", kNoNetwork);
}
WEFT_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, ncclLLA2AHandle* outHandle,
         ncclDevResourceRequirements* outReq) {
  return weft::api::guard("ncclLLA2ACreateRequirement", [&]() -> ncclResult_t {
    return weft::core::lla2aCreateRequirement(nBlocks, nSlots, reinterpret_cast<LLA2AHandle*>(outHandle),
                                              reinterpret_cast<DevResourceRequirement*>(outReq));
  });
}
WEFT_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  return weft::core::lla2aCalcSlots(maxElts, maxEltSize);
}
WEFT_API(ncclTeam, ncclTeamWorld, ncclComm_t comm) {
  return usable(comm, "ncclTeamWorld") ? toAbi(weft::core::teamWorld(comm)) : ncclTeam{0, -1, 0};
}
WEFT_API(ncclTeam, ncclTeamLsa, ncclComm_t comm) {
  return usable(comm, "ncclTeamLsa") ? toAbi(weft::core::teamLsa(comm)) : ncclTeam{0, -1, 0};
}
WEFT_API(ncclTeam, ncclTeamRail, ncclComm_t comm) {
  return usable(comm, "ncclTeamRail") ? toAbi(weft::core::teamRail(comm)) : ncclTeam{0, -1, 0};
}
// As NCCL's inline versions: the rank `rank` of `team`, counted in the world / in the LSA team.
WEFT_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam team, int rank) {
  return usable(comm, "ncclTeamRankToWorld") ? comm->rank + (rank - team.rank) * team.stride : -1;
}
WEFT_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam team, int rank) {
  return usable(comm, "ncclTeamRankToLsa") ? weft::core::teamLsa(comm).rank + (rank - team.rank) * team.stride : -1;
}
