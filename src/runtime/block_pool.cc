#include "runtime/block_pool.h"

#include <atomic>

#include "core/log.h"
#include "runtime/gpu.h"

namespace weft::runtime {

size_t BlockPool::sizeClass(size_t bytes) const {
  return bytes == 0 ? granularity_ : (bytes + granularity_ - 1) / granularity_ * granularity_;
}

Status BlockPool::acquire(size_t bytes, void** ptr, int domain) {
  WEFT_CHECK_ARG(ptr != nullptr, "BlockPool::acquire: ptr is NULL");
  *ptr = nullptr;
  const Key key{domain, sizeClass(bytes)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = parked_.find(key);
    if (it != parked_.end()) {
      *ptr = it->second;
      parked_.erase(it);
      inUse_[*ptr] = key;
      return ncclSuccess;
    }
  }
  void* fresh = nullptr;
  WEFT_TRY(alloc_(&fresh, key.second));  // outside the lock: a driver call may take its time
  std::lock_guard<std::mutex> lock(mu_);
  inUse_[fresh] = key;
  *ptr = fresh;
  return ncclSuccess;
}

Status BlockPool::release(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = inUse_.find(ptr);
  if (it == inUse_.end()) {
    WEFT_WARN("internal: memory block %p was not handed out by weft's pool (freed twice?); left alone", ptr);
    return ncclInternalError;
  }
  parked_.emplace(it->second, ptr);
  inUse_.erase(it);
  return ncclSuccess;
}

int BlockPool::trim() {
  std::multimap<Key, void*> going;
  {
    std::lock_guard<std::mutex> lock(mu_);
    going.swap(parked_);
  }
  for (auto& entry : going) free_(entry.second, entry.first.first);
  return (int)going.size();
}

size_t BlockPool::parkedBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& entry : parked_) n += entry.first.second;
  return n;
}

size_t BlockPool::inUseBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& entry : inUse_) n += entry.second.second;
  return n;
}

// Never destroyed: communicators destroyed from static destructors may still release into them.
BlockPool& pinnedPool() {
  static BlockPool* pool =
      new BlockPool(hostAllocMapped, [](void* p, int) { freeHostQuiet(p); }, 4096);  // pinning works in pages
  return *pool;
}

BlockPool& devicePool() {
  auto freeOnItsDevice = [](void* p, int dev) {
    ScopedDevice on;
    if (isError(on.set(dev))) WEFT_WARN("could not select device %d to free a pooled block", dev);
    freeDeviceQuiet(p);
  };
  static BlockPool* pool = new BlockPool(deviceMalloc, freeOnItsDevice, 512);  // cudaMalloc's alignment
  return *pool;
}

Status pinnedBlockAcquire(size_t bytes, void** ptr) { return pinnedPool().acquire(bytes, ptr); }

void pinnedBlockRelease(void* ptr) { (void)pinnedPool().release(ptr); }

Status deviceBlockAcquire(size_t bytes, void** ptr) {
  int dev = -1;
  WEFT_TRY(getDevice(&dev));
  return devicePool().acquire(bytes, ptr, dev);
}

void deviceBlockRelease(void* ptr) { (void)devicePool().release(ptr); }

namespace {
std::atomic<int> gUsers{0};
}  // namespace

void blockPoolUserIn() { gUsers.fetch_add(1); }

void blockPoolUserOut() {
  if (gUsers.fetch_sub(1) != 1) return;
  // cudaFreeHost / cudaFree wait for the device: only now can no communicator's kernel be
  // waiting for the thread that runs them.
  const int host = pinnedPool().trim();
  const int device = devicePool().trim();
  WEFT_INFO(log::kAllocHost, "last communicator of the process gone: %d pinned host and %d device block(s) freed",
            host, device);
}

}  // namespace weft::runtime
