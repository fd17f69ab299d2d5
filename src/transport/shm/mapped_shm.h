// Host shared memory that kernels reach: a shared-memory segment (shm_segment.h) pinned and mapped
// into the GPUs' address space. The SHM transport keeps the connection memory of GPU pairs without
// peer-to-peer access in it: the sender's kernel stores into the receiver's buffers there, the
// receiver's kernel loads them, and both poll the counters beside them (system-scope ordering, as
// between two GPUs).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"
#include "transport/shm/shm_segment.h"

namespace weft::transport::shm {

class MappedShm {
 public:
  ~MappedShm();
  MappedShm(const MappedShm&) = delete;
  MappedShm& operator=(const MappedShm&) = delete;

  // A new segment of `bytes` (zero), mapped for the GPUs.
  [[nodiscard]] static Status create(const std::string& tag, size_t bytes, std::unique_ptr<MappedShm>* out);
  // A peer's segment (its descriptor checked), mapped for the GPUs.
  [[nodiscard]] static Status open(const ShmDesc& d, const char* from, std::unique_ptr<MappedShm>* out);

  char* devicePtr() const { return devicePtr_; }
  char* hostPtr() const { return static_cast<char*>(segment_.ptr()); }  // the same bytes, for host threads
  size_t bytes() const { return segment_.bytes(); }
  ShmDesc desc() const { return segment_.desc(); }
  // The creator's: once every peer has opened it (see ShmSegment::unlinkName).
  void unlinkName() { segment_.unlinkName(); }
  void unlinkAsOnlyOpener() { segment_.unlinkAsOnlyOpener(); }

 private:
  MappedShm() = default;
  [[nodiscard]] Status map();

  ShmSegment segment_;
  char* devicePtr_ = nullptr;
};

}  // namespace weft::transport::shm
