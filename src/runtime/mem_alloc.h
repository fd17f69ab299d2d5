// The memory behind ncclMemAlloc / ncclMemFree: shareable allocations (cuMem with POSIX fd handles,
// access for every P2P-capable device; cudaMalloc where cuMem is unusable) kept in a process-wide
// registry, so that a free, or a later buffer registration, knows what kind a pointer is.
#pragma once

#include <cstddef>

#include "core/status.h"
#include "runtime/ipc_mem.h"
#include "runtime/shareable_alloc.h"
#include "util/unique_fd.h"

namespace weft::runtime {

// Allocates at least `bytes` (> 0) on the current device, rounded up to the recommended granularity.
[[nodiscard]] Status memAlloc(void** ptr, size_t bytes);

// Frees an allocation made by memAlloc (ptr = its start), on its own device; the caller's current
// device is unchanged. NULL is a no-op; an unknown pointer is ncclInvalidArgument.
[[nodiscard]] Status memFree(void* ptr);

// What the registry knows about the memAlloc allocation containing `ptr`.
struct MemAllocInfo {
  void* base = nullptr;
  size_t bytes = 0;
  MemKind kind = MemKind::kNone;
  int device = -1;
};
bool memAllocFind(const void* ptr, MemAllocInfo* out);

// For sharing part of a memAlloc buffer with another process (buffer registration): a descriptor of
// [ptr, ptr + bytes) and, for cuMem memory, a new fd to send (fd may be NULL when not wanted).
[[nodiscard]] Status memAllocExport(const void* ptr, size_t bytes, IpcMemDesc* desc, util::UniqueFd* fd);

}  // namespace weft::runtime
