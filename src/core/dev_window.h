// Windows as NCCL's device API sees them. A kernel compiled against NCCL's nccl_device.h holds an
// ncclWindow_t: a pointer to device memory laid out as NCCL 2.28.9's ncclWindow_vidmem, from which
// its inline code finds rank i of the LSA team (the ranks that reach each other's memory by loads
// and stores: here, the ranks of one host) at lsaFlatBase + i * stride4G * 4 GiB + offset.
//
// So a window whose buffers are cuMem memory (ncclMemAlloc) on every rank of the team is mapped
// flat: one address range per rank, the team's allocations side by side in it, each buffer at the
// same distance from its slot's start; the window handle is then the device pointer of that
// structure. Windows of other memory (cudaMalloc) keep an opaque handle: collectives and
// point-to-point use them, device code cannot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "runtime/flat_map.h"

struct ncclComm;

namespace weft::core {

// NCCL 2.28.9's ncclWindow_vidmem (nccl_device/impl/core__types.h), field by field.
struct WindowVidmem {
  void* winHost;      // the library's own window object (weft: the FlatWindow)
  char* lsaFlatBase;  // where team rank 0's buffer starts
  int lsaRank;        // this rank in the team
  int worldRank;
  uint32_t stride4G;     // distance between two ranks' slots, in units of 4 GiB
  uint32_t mcOffset4K;   // multicast (unused: weft never uses NVLink multicast)
  uint32_t ginOffset4K;  // network (unused)
  void* ginWins[4];
};
static_assert(sizeof(WindowVidmem) == 72, "ncclWindow_vidmem is 72 bytes in NCCL 2.28.9");
static_assert(offsetof(WindowVidmem, stride4G) == 24 && offsetof(WindowVidmem, ginWins) == 40,
              "ncclWindow_vidmem layout");

// The ranks of this host, when they are consecutive world ranks (as NCCL's team arithmetic needs:
// world rank = rank - lsaRank + team rank); else this rank alone.
struct LsaTeam {
  int rank = 0;
  int size = 1;
  int firstWorldRank = 0;
};
LsaTeam lsaTeamOf(const std::vector<uint64_t>& hostHashes, int rank);

// One team member's buffer: whether it can be mapped flat (cuMem memory exported as an fd), its
// allocation's size and where the buffer starts in it.
struct FlatPart {
  bool capable = false;
  uint64_t allocBytes = 0;
  uint64_t offset = 0;
};
struct FlatPlan {
  bool ok = false;
  const char* why = "";  // when not ok
  size_t stride = 0;     // a multiple of 4 GiB
  size_t lead = 0;       // every buffer starts `lead` bytes into its slot
};
// Pure: where each member's allocation goes (slot * stride + lead - offset, a multiple of the
// granularity), or why the window cannot be flat.
FlatPlan planFlat(const std::vector<FlatPart>& parts, size_t granularity);

// A flat window on this rank: the mapping and the device structure its handle points to.
class FlatWindow {
 public:
  ~FlatWindow();
  WindowVidmem* device() const { return device_; }
  const WindowVidmem& host() const { return host_; }  // what device() holds
  const LsaTeam& team() const { return team_; }
  // Collective over the team: sends this rank's allocation (fd) to every member, maps every
  // member's, and uploads the structure. `parts` are the team's (from the window exchange),
  // `sequence` tags the fds. Errors name the member.
  [[nodiscard]] static Status create(ncclComm* comm, const LsaTeam& team, const std::vector<FlatPart>& parts,
                                     const FlatPlan& plan, const void* buff, uint64_t sequence,
                                     std::unique_ptr<FlatWindow>* out);

 private:
  runtime::FlatMapping mapping_;
  WindowVidmem* device_ = nullptr;
  WindowVidmem host_{};
  LsaTeam team_;
};

// NCCL 2.28.9's ncclDevCommWindowTable (nccl_device/impl/comm__types.h): what its ncclFindWindow
// searches for the window holding a pointer.
struct DevWindowTable {
  struct Entry {
    uintptr_t base, size;
    void* window;
  } entries[32];
  DevWindowTable* next;
};
static_assert(sizeof(DevWindowTable) == 776, "ncclDevCommWindowTable is 776 bytes in NCCL 2.28.9");

}  // namespace weft::core
