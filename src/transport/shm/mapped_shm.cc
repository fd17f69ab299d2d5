#include "transport/shm/mapped_shm.h"

#include <memory>
#include <utility>

#include "runtime/block_pool.h"
#include "runtime/gpu.h"
#include "runtime/mem_tally.h"

namespace weft::transport::shm {

// cudaHostUnregister waits for the device's queued work, which may include a kernel waiting for
// this very thread (block_pool.h says when): it runs, with the unmap that must follow it, once that
// cannot be. The name goes now: it needs no device.
MappedShm::~MappedShm() {
  if (devicePtr_ == nullptr) return;  // never registered: the segment's own destructor unmaps it
  runtime::tallyRelease(devicePtr_);
  segment_.unlinkName();
  auto segment = std::make_shared<ShmSegment>(std::move(segment_));
  runtime::releaseWhenSafe(
      [segment] {
        (void)runtime::hostUnregister(segment->ptr());  // reports its own failure
        segment->reset();
      },
      segment->bytes());
}

Status MappedShm::map() {
  void* device = nullptr;
  WEFT_TRY(runtime::hostRegisterMapped(segment_.ptr(), segment_.bytes(), &device));
  devicePtr_ = static_cast<char*>(device);
  return ncclSuccess;
}

Status MappedShm::create(const std::string& tag, size_t bytes, std::unique_ptr<MappedShm>* out) {
  std::unique_ptr<MappedShm> m(new MappedShm());
  WEFT_TRY(ShmSegment::create(tag, bytes, &m->segment_));
  WEFT_TRY(m->map());
  // Counted by its creator only: the peers that open it map the same pages.
  runtime::tallyAllocation(m->devicePtr_, runtime::MemPlace::kShared, m->bytes());
  *out = std::move(m);
  return ncclSuccess;
}

Status MappedShm::open(const ShmDesc& d, const char* from, std::unique_ptr<MappedShm>* out) {
  std::unique_ptr<MappedShm> m(new MappedShm());
  WEFT_TRY(ShmSegment::open(d, from, &m->segment_));
  WEFT_TRY(m->map());
  *out = std::move(m);
  return ncclSuccess;
}

}  // namespace weft::transport::shm
