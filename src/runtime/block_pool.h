// Pinned host and device memory of communicators (work FIFO, abort flag, graph work buffers, the
// device copy of the communicator, rings, peer tables) is handed back to a process-wide pool
// instead of to cudaFreeHost/cudaFree when a communicator goes.
//
// Why: cudaFreeHost and cudaFree wait for the device to go idle. A rank that destroys one
// communicator while another communicator of the same process has a kernel waiting for that very
// rank (threads mode: rank 0 already inside the parent's next allreduce, rank 1 still destroying a
// split child) would wait forever for a kernel that waits for it. Seen on one GPU shared by two
// threads (session 33: cuMemFreeHost, then cuMemFree_v2, under ncclCommDestroy, against the other
// rank's cudaStreamSynchronize). So a block is parked and reused by the next communicator that
// asks for its size class on the same device (the same settings give the same sizes: a
// split-and-destroy loop reuses rather than grows), and the pools really free their parked blocks
// only when the last communicator of the process goes (no weft kernel can be waiting then).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "core/status.h"

namespace weft::runtime {

class BlockPool {
 public:
  using AllocFn = std::function<Status(void** ptr, size_t bytes)>;
  using FreeFn = std::function<void(void* ptr, int domain)>;
  // Blocks are sized in whole multiples of `granularity` bytes.
  BlockPool(AllocFn alloc, FreeFn free, size_t granularity)
      : alloc_(std::move(alloc)), free_(std::move(free)), granularity_(granularity) {}
  ~BlockPool() = default;  // blocks still held at exit go with the process
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of at least `bytes`: a parked one of the same size class and `domain` (the device, for
  // device memory), else a new one from the alloc function (called with that device current).
  // Its contents are whatever the last user left: callers initialize it.
  [[nodiscard]] Status acquire(size_t bytes, void** ptr, int domain = 0);
  // Parks a block from acquire(); nullptr is ignored. A pointer the pool never handed out (or one
  // released twice) is reported (ncclInternalError) and left alone.
  Status release(void* ptr);
  // Frees every parked block; blocks in use stay. Returns how many were freed.
  int trim();

  size_t parkedBytes() const;
  size_t inUseBytes() const;
  size_t sizeClass(size_t bytes) const;

 private:
  using Key = std::pair<int, size_t>;  // domain, size class
  AllocFn alloc_;
  FreeFn free_;
  const size_t granularity_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Key> inUse_;
  std::multimap<Key, void*> parked_;
};

// Pinned host memory, cudaHostAlloc(Mapped | Portable): usable from every device, one domain.
[[nodiscard]] Status pinnedBlockAcquire(size_t bytes, void** ptr);
void pinnedBlockRelease(void* ptr);
BlockPool& pinnedPool();
// Device memory of the current device (cudaMalloc), kept per device.
[[nodiscard]] Status deviceBlockAcquire(size_t bytes, void** ptr);
void deviceBlockRelease(void* ptr);
BlockPool& devicePool();

// Releases that wait for the device and cannot be pooled, because the memory belongs to one
// communicator's peers (the SHM transport's mapped segments: cudaHostUnregister; connection
// memory made with cudaMalloc for legacy CUDA IPC where cuMem is missing: cudaFree). While some
// communicator has several ranks in this process (threads mode), a kernel on the device may wait
// for another thread's rank, and that thread may be the one releasing: such releases wait until no
// communicator counted in has several ranks here, or none is left. Otherwise (one rank per process,
// as PyTorch runs) they run at once: the kernels the device holds then wait only for ranks of other
// processes, which never wait for this release. Tried in session 34: a thread of their own does not
// help, because cuMemHostUnregister holds a driver lock while it waits, and the other ranks'
// cudaMemsetAsync and cudaHostRegister then wait behind it. `bytes` is reported while it waits.
void releaseWhenSafe(std::function<void()> release, size_t bytes);
size_t releasesWaitingBytes();

// Communicators that hold blocks: each counts itself in once it takes any (sharesProcess: another
// of its ranks lives in this process), and out when it has handed them back with the same flag; the
// last one out trims both pools, and the last one out that shares its process runs the waiting
// releases. While releases or trims run, a communicator that shares the process waits to count in
// (before it could launch a kernel that waits for a thread held up behind their driver locks).
void blockPoolUserIn(bool sharesProcess);
void blockPoolUserOut(bool sharesProcess);

}  // namespace weft::runtime
