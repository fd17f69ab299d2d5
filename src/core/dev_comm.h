// The host half of NCCL's device API (nccl_device.h): device communicators, teams and LSA
// barriers, for kernels compiled against NCCL 2.28.9's headers. Their device code is NCCL's inline
// code reading these structures, so they are laid out exactly as NCCL's (checked below).
//
// What works: the LSA team (the ranks of one host when they are consecutive), window pointers
// (core/dev_window.h), resource buffers (ncclDevResourceRequirements), LSA barriers
// (lsaBarrierCount, ncclLsaBarrierCreateRequirement; barrierCount too when the communicator is one
// host), the LSA all-to-all's buffers (ncclLLA2ACreateRequirement) and ncclFindWindow. What is
// refused with ncclInvalidUsage, naming the field: multimem (NVLink multicast, which weft never
// uses) and the network (GIN signals, counters, rail barriers, contexts).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dev_window.h"
#include "core/status.h"

struct ncclComm;

namespace weft::core {

struct DevTeam {
  int nRanks, rank, stride;
};

// NCCL 2.28.9's requirement lists (nccl_device/core.h).
struct DevResourceRequirement {
  DevResourceRequirement* next;
  size_t bufferSize, bufferAlign;
  uint32_t* outBufferHandle;  // gets the buffer's place in the resource window, in 128-byte units
  int ginSignalCount;
  int ginCounterCount;
  uint32_t* outGinSignalStart;
  uint32_t* outGinCounterStart;
};
static_assert(sizeof(DevResourceRequirement) == 56 && offsetof(DevResourceRequirement, outBufferHandle) == 24,
              "ncclDevResourceRequirements layout");
struct DevTeamRequirement {
  DevTeamRequirement* next;
  DevTeam team;
  bool multimem;
  void* outMultimemHandle;
};
static_assert(sizeof(DevTeamRequirement) == 32, "ncclTeamRequirements layout");
struct DevCommRequirements {
  DevResourceRequirement* resourceRequirementsList;
  DevTeamRequirement* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;
  int ginSignalCount;
  int ginCounterCount;
};
static_assert(sizeof(DevCommRequirements) == 56 && offsetof(DevCommRequirements, ginForceEnable) == 40,
              "ncclDevCommRequirements layout");

struct LsaBarrierHandle {
  uint32_t bufHandle;
  int nBarriers;
};

// NCCL 2.28.9's ncclDevComm (nccl_device/impl/comm__types.h).
struct DevCommAbi {
  int rank, nRanks;
  uint32_t nRanksRcp32;
  int lsaRank, lsaSize;
  uint32_t lsaSizeRcp32;
  DevWindowTable* windowTable;
  WindowVidmem* resourceWindow;
  WindowVidmem resourceWindowInlined;
  void* lsaMultimem;
  LsaBarrierHandle lsaBarrier;
  uint32_t railGinBarrier[2];
  uint8_t ginContextCount;
  uint8_t ginTypes[4];
  void* ginHandles[4];
  uint32_t ginSignalBase;
  int ginSignalCount;
  uint32_t ginCounterBase;
  int ginCounterCount;
  uint64_t* ginSignalShadows;
};
static_assert(sizeof(DevCommAbi) == 200, "ncclDevComm is 200 bytes in NCCL 2.28.9");
static_assert(offsetof(DevCommAbi, windowTable) == 24 && offsetof(DevCommAbi, resourceWindowInlined) == 40 &&
                  offsetof(DevCommAbi, lsaBarrier) == 120 && offsetof(DevCommAbi, ginContextCount) == 136 &&
                  offsetof(DevCommAbi, ginHandles) == 144 && offsetof(DevCommAbi, ginSignalShadows) == 192,
              "ncclDevComm layout");

// NCCL's reciprocal for its fast division (utility.h idivRcp32): 2^32 / x, rounded for powers of 2.
constexpr uint32_t divisionReciprocal(uint32_t x) { return UINT32_MAX / x + ((x & (x - 1)) == 0 ? 1 : 0); }

// An LSA barrier's state, in 32-bit words: epochs (multicast, unicast), the multicast inbox, then
// one inbox per (barrier, team rank). Pure.
size_t lsaBarrierBytes(int nBarriers, int teamRanks);

// The teams of a communicator (ncclTeamWorld, ncclTeamLsa, ncclTeamRail).
DevTeam teamWorld(const ncclComm* comm);
DevTeam teamLsa(const ncclComm* comm);
DevTeam teamRail(const ncclComm* comm);

struct LLA2AHandle {
  uint32_t bufHandle;
  uint32_t nSlots;
};
// The LSA all-to-all's buffer: per block a header line and two sets (alternate epochs) of nSlots
// 16-byte lines; an element takes one line per 8 bytes. Pure.
size_t lla2aBytes(int nBlocks, int nSlots);
int lla2aCalcSlots(int maxElts, int maxEltSize);  // 0 (and a warning) for nonsense
[[nodiscard]] Status lla2aCreateRequirement(int nBlocks, int nSlots, LLA2AHandle* outHandle,
                                            DevResourceRequirement* outReq);

[[nodiscard]] Status lsaBarrierCreateRequirement(DevTeam team, int nBarriers, LsaBarrierHandle* outHandle,
                                                 DevResourceRequirement* outReq);
// Collective. Refuses what weft does not provide (every rank fails, naming the field).
[[nodiscard]] Status devCommCreate(ncclComm* comm, const DevCommRequirements* reqs, DevCommAbi* out);
[[nodiscard]] Status devCommDestroy(ncclComm* comm, const DevCommAbi* devComm);

}  // namespace weft::core
