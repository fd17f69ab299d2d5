#include "runtime/mem_alloc.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "core/log.h"

namespace weft::runtime {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, std::unique_ptr<ShareableAlloc>> byBase;  // ordered: range lookups
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: the CUDA runtime may be gone at exit
  return *r;
}

// The allocation containing `p`, or end(). Caller holds the mutex.
auto findLocked(Registry& r, uintptr_t p) {
  auto it = r.byBase.upper_bound(p);
  if (it == r.byBase.begin()) return r.byBase.end();
  --it;
  return p < it->first + it->second->bytes() ? it : r.byBase.end();
}

}  // namespace

Status memAlloc(void** ptr, size_t bytes) {
  WEFT_CHECK_ARG(ptr != nullptr && bytes > 0, "memAlloc: ptr is NULL or size is 0");
  auto alloc = std::make_unique<ShareableAlloc>();
  ShareableOptions options;
  options.recommendedGranularity = true;
  options.legacyHandle = false;  // plain cudaMalloc, as NCCL falls back to; handles are made on export
  WEFT_TRY(allocShareable(bytes, alloc.get(), options));
  void* p = alloc->ptr();
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.byBase[(uintptr_t)p] = std::move(alloc);
  }
  *ptr = p;
  return ncclSuccess;
}

Status memFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  std::unique_ptr<ShareableAlloc> alloc;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.byBase.find((uintptr_t)ptr);
    if (it != r.byBase.end()) {
      alloc = std::move(it->second);
      r.byBase.erase(it);
    }
  }
  if (!alloc) {
    MemAllocInfo inside;
    if (memAllocFind(ptr, &inside)) {
      WEFT_WARN("ncclMemFree(%p): pointer is inside the allocation at %p; pass the pointer ncclMemAlloc returned",
                ptr, inside.base);
    } else {
      WEFT_WARN("ncclMemFree(%p): not a pointer returned by ncclMemAlloc (or already freed)", ptr);
    }
    return ncclInvalidArgument;
  }
  WEFT_INFO(log::kAlloc, "ncclMemFree %p (%zu bytes, %s, device %d)", ptr, alloc->bytes(),
            memKindName(alloc->kind()), alloc->device());
  alloc->reset();  // on the allocation's device; restores the caller's
  return ncclSuccess;
}

bool memAllocFind(const void* ptr, MemAllocInfo* out) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = findLocked(r, (uintptr_t)ptr);
  if (it == r.byBase.end()) return false;
  const ShareableAlloc& a = *it->second;
  *out = MemAllocInfo{a.ptr(), a.bytes(), a.kind(), a.device()};
  return true;
}

Status memAllocExport(const void* ptr, size_t bytes, IpcMemDesc* desc, util::UniqueFd* fd) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);  // keeps the allocation alive while exporting
  auto it = findLocked(r, (uintptr_t)ptr);
  if (it == r.byBase.end()) {
    WEFT_WARN("memAllocExport: %p is not inside memory from ncclMemAlloc", ptr);
    return ncclInvalidArgument;
  }
  ShareableAlloc& a = *it->second;
  if (a.kind() == MemKind::kLegacyCudaIpc) {
    WEFT_WARN("memAllocExport: %p is cudaMalloc memory (cuMem unusable); legacy export of ncclMemAlloc buffers "
              "is not supported yet", ptr);
    return ncclInvalidUsage;
  }
  WEFT_TRY(exportMem(a, (uintptr_t)ptr - it->first, bytes, desc));
  if (fd != nullptr) WEFT_TRY(a.exportFd(fd));
  return ncclSuccess;
}

}  // namespace weft::runtime
