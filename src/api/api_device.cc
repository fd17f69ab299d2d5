// The host entry points of NCCL's device API (nccl_device.h, NCCL 2.28). weft does not provide the
// device API: its device-side functions are inline code compiled into the client's kernels against
// NCCL's private structure layouts. The names exist so that clients resolve; each says so.
#include "api/export.h"

using weft::api::notImplemented;

namespace {
constexpr const char* kWhy = "the NCCL device API (nccl_device.h) is not provided by weft";
}

// Only pointers to these cross the ABI; their contents are NCCL-private.
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;
// Returned by value: three ints, as in nccl_device/core.h.
struct ncclTeam { int nRanks, rank, stride; };

WEFT_API(ncclResult_t, ncclDevCommCreate, ncclComm_t, const ncclDevCommRequirements*, ncclDevComm*) {
  return notImplemented("ncclDevCommCreate", kWhy);
}
WEFT_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t, const ncclDevComm*) {
  return notImplemented("ncclDevCommDestroy", kWhy);
}
WEFT_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam, int, ncclLsaBarrierHandle*, ncclDevResourceRequirements*) {
  return notImplemented("ncclLsaBarrierCreateRequirement", kWhy);
}
WEFT_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t, ncclTeam, int, ncclGinBarrierHandle*, ncclDevResourceRequirements*) {
  return notImplemented("ncclGinBarrierCreateRequirement", kWhy);
}
WEFT_API(ncclResult_t, ncclLLA2ACreateRequirement, int, int, ncclLLA2AHandle*, ncclDevResourceRequirements*) {
  return notImplemented("ncclLLA2ACreateRequirement", kWhy);
}
// The functions below cannot return an error code; they warn and return an empty answer.
WEFT_API(int, ncclLLA2ACalcSlots, int, int) {
  (void)notImplemented("ncclLLA2ACalcSlots", kWhy);
  return 0;
}
WEFT_API(ncclTeam, ncclTeamWorld, ncclComm_t) {
  (void)notImplemented("ncclTeamWorld", kWhy);
  return ncclTeam{0, -1, 0};
}
WEFT_API(ncclTeam, ncclTeamLsa, ncclComm_t) {
  (void)notImplemented("ncclTeamLsa", kWhy);
  return ncclTeam{0, -1, 0};
}
WEFT_API(ncclTeam, ncclTeamRail, ncclComm_t) {
  (void)notImplemented("ncclTeamRail", kWhy);
  return ncclTeam{0, -1, 0};
}
WEFT_API(int, ncclTeamRankToWorld, ncclComm_t, ncclTeam, int) {
  (void)notImplemented("ncclTeamRankToWorld", kWhy);
  return -1;
}
WEFT_API(int, ncclTeamRankToLsa, ncclComm_t, ncclTeam, int) {
  (void)notImplemented("ncclTeamRankToLsa", kWhy);
  return -1;
}
