// What memory each communicator holds, by place and use (user pain P8: a communicator's footprint is
// opaque; reliability matrix row 13).
//
// The runtime's allocators (pool blocks, shareable and cuMem allocations, pinned shared-memory
// segments) charge what they hand out to the tally of the communicator that is setting up on the
// calling thread (a MemTallyScope), and remember which tally each pointer went to, so that a
// release charges it back wherever it runs: a destroy, a graph's destruction callback, a
// release deferred until no kernel can wait for it. Memory handed out with no scope open (the
// user's ncclMemAlloc) belongs to no communicator and is not counted.
//
// What is counted is what the allocator handed out: whole pool size classes, cuMem sizes rounded
// to the allocation granularity. Not counted: the driver's own rounding of small cudaMalloc blocks
// into its 2 MiB pages, CUDA's per-context memory, the kernels' code (loaded once per process).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace weft::runtime {

enum class MemPlace : int {
  kGpu = 0,     // device memory of the communicator's GPU
  kPinned = 1,  // pinned host memory mapped for the GPU (cudaHostAlloc)
  kShared = 2,  // /dev/shm segments pinned for the GPU (SHM transport, network staging)
  kCount
};

enum class MemUse : int {
  kState = 0,        // device copy of the communicator, rings, peer tables, work FIFO, flags
  kConnections = 1,  // connection counters and staging buffers (P2P, SHM, network)
  kGraphs = 2,       // work of the calls captured in CUDA graphs (lives as long as the graphs)
  kWindows = 3,      // symmetric windows, device communicators, shared registrations
  kCount
};

const char* memUseName(MemUse use);
// "512 B", "4.0 KiB", "36.25 MiB".
std::string memSizeText(int64_t bytes);

class MemTally {
 public:
  int64_t bytes(MemPlace place) const;
  int64_t bytes(MemPlace place, MemUse use) const;
  int64_t peak(MemPlace place) const { return peak_[(int)place].load(std::memory_order_relaxed); }
  void add(MemPlace place, MemUse use, int64_t delta);

  // "GPU 36.27 MiB (connections 36.00 MiB, state 2.5 KiB), pinned host 1.13 MiB (...), /dev/shm 0 B":
  // uses with no bytes left out.
  std::string text() const;

 private:
  std::atomic<int64_t> bytes_[(int)MemPlace::kCount][(int)MemUse::kCount] = {};
  std::atomic<int64_t> peak_[(int)MemPlace::kCount] = {};
};

// While one lives, the allocations of this thread are charged to `tally` for `use` (scopes nest;
// the innermost counts). A null tally charges nothing. With `growthLog` set, a growth of the tally
// over the scope's life is logged (INFO, INIT and ALLOC) as "<growthLog>: ...": memory that a
// communicator takes after its creation is never a surprise. Inside another scope with a growth
// log, only the outer one logs.
class MemTallyScope {
 public:
  MemTallyScope(std::shared_ptr<MemTally> tally, MemUse use, std::string growthLog = "");
  // Keeps the current tally, changes the use.
  explicit MemTallyScope(MemUse use);
  ~MemTallyScope();
  MemTallyScope(const MemTallyScope&) = delete;
  MemTallyScope& operator=(const MemTallyScope&) = delete;

 private:
  void enter(std::shared_ptr<MemTally> tally, MemUse use);
  std::shared_ptr<MemTally> savedTally_;
  MemUse savedUse_;
  std::string growthLog_;
  bool nested_ = false;  // inside another scope with a growth log: that one logs
  int64_t startBytes_[(int)MemPlace::kCount] = {};
};

// Called by the allocators. `key` is the pointer handed out; charged to the current scope's tally
// (nothing without one).
void tallyAllocation(const void* key, MemPlace place, size_t bytes);
// Charges back whatever tallyAllocation recorded for `key` (nothing if it recorded none).
void tallyRelease(const void* key);

}  // namespace weft::runtime
