// The buffers a communicator's user registered (ncclCommRegister / ncclCommDeregister), as NCCL
// keeps them: ranges widened to whole host pages, sorted by start; a registration that lies inside
// one already kept shares it (one more reference, the same handle), anything else gets a range of
// its own. A handle is a token unique in the process and never reused (not a pointer): a stale or
// another communicator's handle is refused, never followed.
//
// Point-to-point transfers use them for zero-copy (transport/p2p/reg_sharing.h): a receive buffer
// inside a registration is shared with the sending peer, which then writes into it directly.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace weft::core {

struct Registration {
  uintptr_t begin = 0;  // page-aligned
  uintptr_t end = 0;    // page-aligned, exclusive
  int refs = 0;
  uint64_t handle = 0;  // the token ncclCommRegister gave
};

class RegistrationTable {
 public:
  explicit RegistrationTable(size_t pageBytes);

  // Registers [ptr, ptr + bytes); returns the handle. The caller checked bytes > 0 and that
  // ptr + bytes + a page does not wrap around. `kept` (if not null) gets a copy of the range now.
  void* add(uintptr_t ptr, size_t bytes, Registration* kept = nullptr);
  // Drops one reference of `handle`; false when the table holds no such handle. *released (if not
  // null): whether that was the last reference (the registration is gone).
  bool remove(const void* handle, bool* released = nullptr);
  // A registration holding all of [ptr, ptr + bytes), if any (bytes may be 0).
  bool findRange(uintptr_t ptr, size_t bytes, Registration* out) const;
  // Cheap, without the lock: for the launch path's "nothing registered" test.
  bool empty() const { return count_.load(std::memory_order_relaxed) == 0; }
  // A copy of the registration a handle names; false when the table holds no such handle.
  bool find(const void* handle, Registration* out) const;
  size_t size() const;
  size_t pageBytes() const { return pageBytes_; }

 private:
  size_t indexOf(const void* handle) const;  // slots_.size() when absent; caller holds mutex_

  const size_t pageBytes_;
  mutable std::mutex mutex_;  // PyTorch's allocator hook registers from whichever thread allocates
  std::vector<Registration> slots_;  // sorted by begin
  std::atomic<size_t> count_{0};     // slots_.size()
};

}  // namespace weft::core
