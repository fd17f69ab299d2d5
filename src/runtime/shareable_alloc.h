// Device memory that other processes of the same host can map.
//
// Preferred kind: a cuMem allocation (cuMemCreate with POSIX file-descriptor handles) mapped into a
// reserved address range, readable and writable by the owning device and by every device that has
// P2P access to it. Another process maps it from a file descriptor (exportFd → SCM_RIGHTS →
// importMem in ipc_mem.h). Fallback kind (driver/GPU without it, or NCCL_CUMEM_ENABLE=0): plain
// cudaMalloc memory shared through a legacy 64-byte CUDA IPC handle.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "util/unique_fd.h"

namespace weft::runtime {

enum class MemKind : uint32_t { kNone = 0, kCuMemFd = 1, kLegacyCudaIpc = 2 };
const char* memKindName(MemKind kind);

// A cudaIpcMemHandle_t's 64 bytes, opaque here so that this header needs no CUDA types.
struct LegacyIpcHandle {
  char bytes[64];
};

// kAuto follows cuMemUsable() (and so NCCL_CUMEM_ENABLE); kCuMem and kLegacy ignore the setting
// (kCuMem fails where the driver or GPU cannot do it).
enum class KindRequest { kAuto, kCuMem, kLegacy };

struct ShareableOptions {
  KindRequest kind = KindRequest::kAuto;  // kAuto: cuMem when cuMemUsable(), else legacy
  bool recommendedGranularity = false;    // round to the driver's recommended granularity, not the minimum
  bool legacyHandle = true;               // legacy kind: also get the IPC handle (off for plain cudaMalloc use)
  // Connection memory: the legacy kind's cudaFree (it waits for the device) goes through
  // releaseWhenSafe (block_pool.h). Off for user memory (ncclMemFree frees at once).
  bool freeWhenSafe = false;
};

// Whether cuMem with POSIX fd handles is used for allocations on `device`: NCCL_CUMEM_ENABLE
// (unset or negative = when supported, 0 = never, positive = when supported) and the driver's
// and device's support for virtual memory management and POSIX fd export.
[[nodiscard]] Status cuMemUsable(int device, bool* usable);

class ShareableAlloc {
 public:
  ShareableAlloc() = default;
  ShareableAlloc(ShareableAlloc&& other) noexcept;
  ShareableAlloc& operator=(ShareableAlloc&& other) noexcept;
  ShareableAlloc(const ShareableAlloc&) = delete;
  ShareableAlloc& operator=(const ShareableAlloc&) = delete;
  ~ShareableAlloc() { reset(); }

  bool valid() const { return kind_ != MemKind::kNone; }
  void* ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }  // the whole allocation: the request rounded up
  MemKind kind() const { return kind_; }
  int device() const { return device_; }
  // Unique within this process; the tag under which the owner sends the fd (see ipc_mem.h).
  uint64_t localId() const { return localId_; }
  const LegacyIpcHandle& legacyHandle() const { return legacy_; }

  // kCuMemFd only: a new file descriptor for the physical memory, for one importer.
  [[nodiscard]] Status exportFd(util::UniqueFd* out) const;

  // Unmaps and frees (on the owning device; the caller's current device is kept). Failures warn.
  void reset();

 private:
  friend struct ShareableAllocImpl;  // the allocation code in shareable_alloc.cc

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  MemKind kind_ = MemKind::kNone;
  int device_ = -1;
  uint64_t localId_ = 0;
  // cuMem parts, each released in reverse order of acquisition by reset().
  unsigned long long handle_ = 0;  // CUmemGenericAllocationHandle
  unsigned long long va_ = 0;      // reserved range (CUdeviceptr), bytes_ long
  bool mapped_ = false;
  bool freeWhenSafe_ = false;  // ShareableOptions::freeWhenSafe
  LegacyIpcHandle legacy_{};
};

// Allocates `bytes` (> 0) on the current device.
[[nodiscard]] Status allocShareable(size_t bytes, ShareableAlloc* out, const ShareableOptions& options = {});

}  // namespace weft::runtime
