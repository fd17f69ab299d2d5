// ncclCommWindowRegister / ncclCommWindowDeregister: windows, registrations every rank makes
// together.
//
// A window is a registration (core/comm_register.h) that the ranks make collectively: each rank
// registers its buffer, shares it at once with every peer of its host that may send to it (the
// zero-copy sharing of transport/p2p/reg_sharing.h), and the ranks exchange one record each over
// the bootstrap. Each rank then maps what its peers shared before the call returns, so the first
// send into a peer's window already goes straight into it, in CUDA graphs too (a buffer that only
// ncclCommRegister registered is shared at its first receive, and graphs never map anything).
//
// Windows of cuMem memory (ncclMemAlloc) on every rank of a host are also mapped flat for NCCL's
// device API (core/dev_window.h): their handle is then the device structure kernels compiled
// against nccl_device.h read (ncclGetLsaPointer, ncclGetPeerPointer, ncclSymPtr).
// Windows registered with NCCL_WIN_COLL_SYMMETRIC that are mapped flat on every rank of the
// communicator (one host) also carry the symmetric collectives (core/symmetric.h).
//
// Unlike NCCL, a rank whose arguments are wrong still takes part in the exchange, so that the
// others fail at once naming it instead of waiting for it; a rank passing a NULL buffer or size 0
// gets a NULL window and the others get theirs (NCCL's others would wait for it). Ordinary cudaMalloc
// memory works too (shared through CUDA IPC), where NCCL needs cuMem memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/dev_window.h"
#include "core/status.h"

struct ncclComm;

namespace weft::core {

// What a rank tells the others about its part of one window registration. Wire format.
constexpr uint32_t kWindowRecordMagic = 0x4e495746u;  // "FWIN"
enum class WindowPart : uint32_t {
  kBuffer = 1,  // registered a buffer
  kNone = 2,    // NULL buffer or size 0: no window on this rank
  kFailed = 3,  // its call failed before the exchange (its log says why)
};
struct WindowRecord {
  uint32_t magic = kWindowRecordMagic;
  uint32_t part = 0;      // WindowPart
  uint64_t sequence = 0;  // this communicator's window registrations before this one
  uint64_t token = 0;     // the buffer's registration handle (0: not registered locally)
  uint64_t bytes = 0;
  uint32_t sharedWithAll = 0;  // 1: shared with every peer of its host that may send to it
  uint32_t flatCapable = 0;    // 1: cuMem memory exported as an fd (core/dev_window.h)
  uint64_t allocBytes = 0;     // flatCapable: its allocation's size
  uint64_t allocOffset = 0;    // flatCapable: where the buffer starts in it
};
static_assert(sizeof(WindowRecord) == 56, "WindowRecord is a wire format");

// Exchanges `mine` with every rank (nRanks 1: no exchange) and checks what came: every record's
// magic and part, that all ranks are at the same window registration, and that none failed.
// Errors name the ranks: ncclInvalidUsage when a rank failed its call or registered a different
// number of windows before, ncclInternalError for a malformed record, and the bootstrap's code
// when a rank cannot be reached.
[[nodiscard]] Status agreeOnWindow(bootstrap::Bootstrap* bootstrap, int rank, int nRanks, const WindowRecord& mine,
                                   std::vector<WindowRecord>* all);

// One rank's windows. Handles are process-unique tokens, never reused (as registration handles).
class WindowTable {
 public:
  struct Window {
    void* registration = nullptr;  // the local registration (NULL: NCCL_LOCAL_REGISTER=0)
    uintptr_t buff = 0;
    size_t bytes = 0;
    int flags = 0;
    std::shared_ptr<FlatWindow> flat;  // mapped for the device API (its device structure is the handle)
    std::shared_ptr<void> owned;       // memory the library made for it (a device communicator's)
  };
  // Keeps w under `handle`, or under a fresh token when handle is null; returns the handle.
  void* add(const Window& w, void* handle = nullptr);
  // Takes the window out; false when the table holds no such handle.
  bool remove(const void* handle, Window* out);
  size_t size() const;
  // Window `handle` owns `memory` from now on: it is freed when the window goes.
  void keep(const void* handle, std::shared_ptr<void> memory);
  // The flat mapping of window `handle` (null when it has none or there is no such window).
  std::shared_ptr<FlatWindow> flatOf(const void* handle) const;
  // Whether [p, p + bytes) lies in one window registered with NCCL_WIN_COLL_SYMMETRIC and mapped
  // flat for a team of teamSize ranks; then *flat0 is where team rank 0's copy of p is and
  // *stride4G the distance between two ranks' copies in units of 4 GiB.
  bool symmetricSpan(uintptr_t p, size_t bytes, int teamSize, uintptr_t* flat0, uint32_t* stride4G) const;
  // The windows registered so far (each rank counts the same: agreeOnWindow checks it).
  uint64_t registered() const;
  void countRegistration();
  // The device table of the flat windows (NCCL's ncclFindWindow searches it), made on first use
  // on the current device and rewritten whenever windows come or go. Null until asked for.
  [[nodiscard]] Status deviceTable(DevWindowTable** out);
  ~WindowTable();

 private:
  [[nodiscard]] Status writeDeviceTableLocked();
  mutable std::mutex mutex_;
  std::map<uint64_t, Window> windows_;
  uint64_t registered_ = 0;
  DevWindowTable* deviceTable_ = nullptr;
};

[[nodiscard]] Status registerWindow(ncclComm* comm, void* buff, size_t size, void** win, int winFlags);
// The collective part, now (no group deferral): for callers that are collective themselves
// (ncclDevCommCreate). `forcedFailure`: this rank's call already failed (the others are told so).
[[nodiscard]] Status registerWindowNow(ncclComm* comm, void* buff, size_t size, void** win, int winFlags,
                                       Status forcedFailure);
[[nodiscard]] Status deregisterWindow(ncclComm* comm, void* win);

}  // namespace weft::core
