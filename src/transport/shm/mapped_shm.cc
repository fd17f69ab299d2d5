#include "transport/shm/mapped_shm.h"

#include "runtime/gpu.h"

namespace weft::transport::shm {

MappedShm::~MappedShm() {
  if (devicePtr_ != nullptr) (void)runtime::hostUnregister(segment_.ptr());  // before the unmap (segment_)
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
