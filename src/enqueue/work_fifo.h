// Accounting of the work FIFO: a ring of DevWork slots shared with the kernels. The host writes
// items at rolling 32-bit positions; a kernel, once its blocks have copied their items, publishes
// the position up to which slots are free again. Positions wrap around 2^32; all comparisons use
// differences, so the wrap is harmless as long as the ring holds fewer than 2^31 slots.
#pragma once

#include <cstdint>

namespace weft::enqueue {

class WorkFifo {
 public:
  // capacity: number of slots, a power of two.
  explicit WorkFifo(uint32_t capacity, uint32_t start = 0)
      : capacity_(capacity), produced_(start), consumed_(start) {}

  uint32_t capacity() const { return capacity_; }
  uint32_t mask() const { return capacity_ - 1; }
  uint32_t produced() const { return produced_; }
  uint32_t consumed() const { return consumed_; }
  uint32_t inFlight() const { return produced_ - consumed_; }
  uint32_t freeSlots() const { return capacity_ - inFlight(); }

  // Records what the kernels report as consumed. Stale reports (older than what is known) and
  // impossible ones (ahead of what was produced) are ignored; the return says which happened.
  bool observeConsumed(uint32_t reported) {
    uint32_t ahead = reported - consumed_;
    if (ahead == 0 || ahead > inFlight()) return false;
    consumed_ = reported;
    return true;
  }

  // Claims n consecutive slots; false when they are not free yet (the caller waits for the
  // kernels and retries). On success *first is the position of the first slot.
  bool reserve(uint32_t n, uint32_t* first) {
    if (n > freeSlots()) return false;
    *first = produced_;
    produced_ += n;
    return true;
  }

  uint32_t slot(uint32_t position) const { return position & mask(); }

 private:
  uint32_t capacity_;
  uint32_t produced_;
  uint32_t consumed_;
};

}  // namespace weft::enqueue
