// Mapped pinned host memory for communicators (work FIFO, abort flag, graph work buffers) that is
// handed back to a process-wide pool instead of to cudaFreeHost when a communicator goes.
//
// Why: cudaFreeHost waits for the device to go idle. A rank that destroys one communicator while
// another communicator of the same process has a kernel waiting for that very rank (threads
// mode: rank 0 already inside the parent's next allreduce, rank 1 still destroying a split child)
// would wait forever for a kernel that waits for it. Seen on one GPU shared by two threads
// (session 33: cuMemFreeHost under ncclCommDestroy against cudaStreamSynchronize). So a block is
// parked and reused by the next communicator of its size class (the same settings give the same
// sizes, so a split-and-destroy loop reuses rather than grows), and the pool really frees its
// parked blocks only when the last communicator of the process goes (no weft kernel can wait then).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace weft::runtime {

class PinnedPool {
 public:
  using AllocFn = std::function<Status(void** ptr, size_t bytes)>;
  using FreeFn = std::function<void(void* ptr)>;
  PinnedPool(AllocFn alloc, FreeFn free) : alloc_(std::move(alloc)), free_(std::move(free)) {}
  ~PinnedPool() = default;  // blocks still held at exit go with the process
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A block of at least `bytes`: a parked one of the same size class, else a new one. Its contents
  // are whatever the last user left (callers initialize it, as after cudaHostAlloc).
  [[nodiscard]] Status acquire(size_t bytes, void** ptr);
  // Parks a block from acquire(); nullptr is ignored. A pointer the pool never gave out is an
  // internal error: it is reported (ncclInternalError) and left alone.
  Status release(void* ptr);
  // Frees every parked block; blocks in use stay. Returns how many were freed.
  int trim();

  size_t parkedBytes() const;
  size_t inUseBytes() const;
  static size_t sizeClass(size_t bytes);  // whole 4 KiB pages: a communicator's FIFO always has the same

 private:
  AllocFn alloc_;
  FreeFn free_;
  mutable std::mutex mu_;
  std::unordered_map<void*, size_t> inUse_;      // block -> its size class
  std::multimap<size_t, void*> parked_;          // size class -> parked block
};

// The process's pool over cudaHostAlloc(Mapped | Portable) / cudaFreeHost.
PinnedPool& pinnedPool();

}  // namespace weft::runtime
