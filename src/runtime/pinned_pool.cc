#include "runtime/pinned_pool.h"

#include "core/log.h"
#include "runtime/gpu.h"

namespace weft::runtime {

size_t PinnedPool::sizeClass(size_t bytes) {
  constexpr size_t kPage = 4096;  // pinning works in pages anyway
  return bytes == 0 ? kPage : (bytes + kPage - 1) / kPage * kPage;
}

Status PinnedPool::acquire(size_t bytes, void** ptr) {
  WEFT_CHECK_ARG(ptr != nullptr, "PinnedPool::acquire: ptr is NULL");
  *ptr = nullptr;
  const size_t cls = sizeClass(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = parked_.find(cls);
    if (it != parked_.end()) {
      *ptr = it->second;
      parked_.erase(it);
      inUse_[*ptr] = cls;
      return ncclSuccess;
    }
  }
  void* fresh = nullptr;
  WEFT_TRY(alloc_(&fresh, cls));  // outside the lock: a driver call may take its time
  std::lock_guard<std::mutex> lock(mu_);
  inUse_[fresh] = cls;
  *ptr = fresh;
  return ncclSuccess;
}

Status PinnedPool::release(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = inUse_.find(ptr);
  if (it == inUse_.end()) {
    WEFT_WARN("internal: pinned host block %p was not handed out by weft's pool (freed twice?); left alone", ptr);
    return ncclInternalError;
  }
  parked_.emplace(it->second, ptr);
  inUse_.erase(it);
  return ncclSuccess;
}

int PinnedPool::trim() {
  std::multimap<size_t, void*> going;
  {
    std::lock_guard<std::mutex> lock(mu_);
    going.swap(parked_);
  }
  for (auto& [cls, p] : going) free_(p);
  return (int)going.size();
}

size_t PinnedPool::parkedBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& [cls, p] : parked_) n += cls;
  return n;
}

size_t PinnedPool::inUseBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& [p, cls] : inUse_) n += cls;
  return n;
}

PinnedPool& pinnedPool() {
  // Never destroyed: communicators destroyed from static destructors may still release into it.
  static PinnedPool* pool = new PinnedPool(hostAllocMapped, freeHostQuiet);
  return *pool;
}

}  // namespace weft::runtime
