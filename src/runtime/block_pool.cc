#include "runtime/block_pool.h"

#include <condition_variable>
#include <cstdint>
#include <vector>

#include "core/log.h"
#include "runtime/gpu.h"
#include "runtime/mem_tally.h"

namespace weft::runtime {

size_t BlockPool::sizeClass(size_t bytes) const {
  if (bytes == 0) return granularity_;
  if (bytes > SIZE_MAX - granularity_) return SIZE_MAX;  // rounding up would wrap to a tiny class
  return (bytes + granularity_ - 1) / granularity_ * granularity_;
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

// A block counts for its whole size class, whether fresh or parked before (mem_tally.h).
Status pinnedBlockAcquire(size_t bytes, void** ptr) {
  WEFT_TRY(pinnedPool().acquire(bytes, ptr));
  tallyAllocation(*ptr, MemPlace::kPinned, pinnedPool().sizeClass(bytes));
  return ncclSuccess;
}

void pinnedBlockRelease(void* ptr) {
  tallyRelease(ptr);
  (void)pinnedPool().release(ptr);
}

Status deviceBlockAcquire(size_t bytes, void** ptr) {
  int dev = -1;
  WEFT_TRY(getDevice(&dev));
  WEFT_TRY(devicePool().acquire(bytes, ptr, dev));
  tallyAllocation(*ptr, MemPlace::kGpu, devicePool().sizeClass(bytes));
  return ncclSuccess;
}

void deviceBlockRelease(void* ptr) {
  tallyRelease(ptr);
  (void)devicePool().release(ptr);
}

namespace {
constexpr size_t kWaitingWarnBytes = size_t(1) << 30;

// Who is counted in, and the releases waiting for nobody to share the process (all under mu).
struct Users {
  std::mutex mu;
  std::condition_variable releasesDone;
  int users = 0;             // communicators holding pool blocks
  int sharingProcess = 0;    // those of them with another rank in this process
  int releasing = 0;         // batches of releases running now
  std::vector<std::function<void()>> releases;
  size_t bytes = 0;
  bool warned = false;
};

Users& users() {
  static Users* u = new Users();  // never destroyed, as the pools
  return *u;
}

// Ends a batch of releases (or trims) that the caller counted in `releasing` under the lock: lets
// communicators that share the process count in again. One counting in meanwhile could launch a
// kernel that waits for a thread stuck behind the driver lock that an unregister or free holds.
void endReleasing() {
  Users& u = users();
  std::lock_guard<std::mutex> lock(u.mu);
  if (--u.releasing == 0) u.releasesDone.notify_all();
}
}  // namespace

void releaseWhenSafe(std::function<void()> release, size_t bytes) {
  Users& u = users();
  {
    // Under the lock, so that a communicator going out now either sees this release or is seen gone.
    std::lock_guard<std::mutex> lock(u.mu);
    if (u.users > 0 && u.sharingProcess > 0) {
      u.releases.push_back(std::move(release));
      u.bytes += bytes;
      WEFT_INFO(log::kAlloc, "%zu bytes of connection memory wait until no communicator has two ranks in this "
                "process (%zu in all)", bytes, u.bytes);
      if (u.bytes >= kWaitingWarnBytes && !u.warned) {
        u.warned = true;  // once per process: a split-and-destroy loop would repeat it
        WEFT_WARN("%zu MiB of destroyed communicators' connection memory (SHM segments, legacy-IPC buffers) is "
                  "kept until no communicator has several ranks in this process: freeing it earlier can wait "
                  "forever for a kernel that waits for another of this process's ranks", u.bytes >> 20);
      }
      return;
    }
    ++u.releasing;
  }
  release();  // under no lock: it calls the driver and may take its time
  endReleasing();
}

size_t releasesWaitingBytes() {
  std::lock_guard<std::mutex> lock(users().mu);
  return users().bytes;
}

void blockPoolUserIn(bool sharesProcess) {
  Users& u = users();
  std::unique_lock<std::mutex> lock(u.mu);
  if (sharesProcess) u.releasesDone.wait(lock, [&u] { return u.releasing == 0; });
  ++u.users;
  if (sharesProcess) ++u.sharingProcess;
}

void blockPoolUserOut(bool sharesProcess) {
  Users& u = users();
  bool last = false;
  std::vector<std::function<void()>> going;
  {
    std::lock_guard<std::mutex> lock(u.mu);
    last = --u.users == 0;
    const bool noneShares = sharesProcess && --u.sharingProcess == 0;
    if (last || noneShares) {
      going.swap(u.releases);
      u.bytes = 0;
    }
    if (last || !going.empty()) ++u.releasing;
  }
  for (auto& release : going) release();  // under no lock: driver calls
  if (last) {
    // cudaFreeHost / cudaFree wait for the device: only now can no communicator's kernel be
    // waiting for the thread that runs them.
    const int host = pinnedPool().trim();
    const int device = devicePool().trim();
    WEFT_INFO(log::kAllocHost,
              "last communicator of the process gone: %d pinned host and %d device block(s) freed, %zu mapped "
              "segment(s) or buffers released", host, device, going.size());
  }
  if (last || !going.empty()) endReleasing();
}

}  // namespace weft::runtime
