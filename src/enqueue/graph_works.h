// Work items of launches captured in CUDA graphs, when they do not fit the kernel parameters.
// They cannot go through the work FIFO (its slots are reused long before a graph replays), so
// they live in pinned buffers of their own, handed out front to back. A buffer is handed out
// again once no graph holds items of it: a capture that takes items of a buffer ties a hold on
// it to its graph, and CUDA drops the hold when the graph and its executable copies are
// destroyed (runtime::captureOnGraphGone). So capturing, replaying and destroying graphs over
// and over reuses one buffer instead of growing; memory is kept for the graphs that are alive.
// Where holds cannot be tied (HIP 5.2) a buffer that a graph took from is never reused.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "device/abi.h"
#include "runtime/gpu.h"

namespace weft::enqueue {

class GraphWorkPool {
 public:
  // Memory and graph holds; the communicator's use pinned mapped memory and CUDA user objects,
  // unit tests stand-ins.
  struct Hooks {
    // A buffer of `bytes` (host pointer and the device's view of it).
    std::function<Status(size_t bytes, void** host, void** devView)> alloc;
    std::function<void(void* host)> free;
    // Ties release(arg) to the graph being captured on the stream (runtime::captureOnGraphGone).
    // Empty where that cannot be done: a buffer's hold is then never released.
    std::function<Status(runtime::Stream, runtime::HostFn release, void* arg)> tie;
  };
  GraphWorkPool(Hooks hooks, uint32_t itemsPerBuffer);
  ~GraphWorkPool();  // frees the buffers; holds of graphs still alive outlive the pool
  GraphWorkPool(const GraphWorkPool&) = delete;
  GraphWorkPool& operator=(const GraphWorkPool&) = delete;

  // Makes sure a buffer exists, so that captures normally allocate nothing (an allocation can
  // break a capture; take() then allocates anyway).
  [[nodiscard]] Status reserve();
  // `n` items for a launch captured on `stream` into the graph `graphId`: host pointer and device view.
  [[nodiscard]] Status take(uint32_t n, runtime::Stream stream, unsigned long long graphId, dev::DevWork** host,
                            const dev::DevWork** devView);

  size_t bufferCount() const { return buffers_.size(); }
  size_t heldCount() const;  // buffers some graph still holds (or that could not be tied)

 private:
  // Shared with the graphs' release calls: 1 for the pool, plus one per graph tie.
  struct Hold {
    std::atomic<uint32_t> refs{1};
  };
  struct Buffer {
    dev::DevWork* host = nullptr;
    const dev::DevWork* devView = nullptr;
    uint32_t capacity = 0;
    uint32_t used = 0;
    Hold* hold = nullptr;
    bool tied = false;  // a hold for graph `tiedGraph` has been taken
    uint32_t untied = 0;  // holds taken that no graph will drop (no tie hook, or it failed)
    unsigned long long tiedGraph = 0;
  };
  static void dropHold(void* hold);
  static bool idle(const Buffer& b) { return b.hold->refs.load(std::memory_order_acquire) == 1; }
  [[nodiscard]] Status addBuffer(uint32_t capacity);
  [[nodiscard]] Status tieTo(Buffer& b, runtime::Stream stream, unsigned long long graphId);

  Hooks hooks_;
  const uint32_t itemsPerBuffer_;
  std::vector<Buffer> buffers_;
  size_t current_ = 0;  // the buffer handed out from
};

}  // namespace weft::enqueue
