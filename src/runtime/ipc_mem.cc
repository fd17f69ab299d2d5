#include "runtime/ipc_mem.h"

#include "runtime/gpu_api.h"
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "core/log.h"
#include "runtime/cuda_check.h"
#include "runtime/gpu.h"
#include "runtime/pointer_facts.h"
#if WEFT_RUNTIME_CUMEM
#include "runtime/cumem.h"
#include "runtime/driver_api.h"
#endif

namespace weft::runtime {
namespace {
// Far above any GPU's memory; a larger size can only come from a corrupted descriptor.
constexpr uint64_t kMaxAllocBytes = 1ull << 48;

// CUDA maps a legacy IPC handle once per device and process: opening an allocation's handle again
// fails ("already mapped"). Imports of one allocation (two registrations inside it, or two
// communicators importing it) share one mapping, counted and closed with its last user.
struct LegacyMapping {
  int device;
  int32_t ownerPid;
  LegacyIpcHandle handle;
  void* base;
  int users;
};
struct LegacyMappings {
  std::mutex mutex;
  std::vector<LegacyMapping> list;  // few: one per imported allocation
};
LegacyMappings& legacyMappings() {  // never destroyed: imports may be released during exit
  static LegacyMappings* m = new LegacyMappings();
  return *m;
}

bool sameHandle(const LegacyIpcHandle& a, const LegacyIpcHandle& b) {
  return std::memcmp(a.bytes, b.bytes, sizeof(a.bytes)) == 0;
}
}  // namespace

Status exportMem(const ShareableAlloc& alloc, size_t offset, size_t bytes, IpcMemDesc* out) {
  WEFT_CHECK_ARG(out != nullptr, "exportMem: out is NULL");
  WEFT_CHECK_ARG(alloc.valid(), "exportMem: the allocation is empty");
  WEFT_CHECK_ARG(offset <= alloc.bytes() && bytes <= alloc.bytes() - offset,
                 "exportMem: region [%zu, +%zu) exceeds the allocation of %zu bytes", offset, bytes, alloc.bytes());
  IpcMemDesc d;
  std::memset(&d, 0, sizeof(d));  // no stray bytes on the wire
  d.magic = kIpcMemDescMagic;
  d.kind = (uint32_t)alloc.kind();
  d.allocBytes = alloc.bytes();
  d.offset = offset;
  d.bytes = bytes;
  d.ownerPid = (int32_t)getpid();
  d.ownerDevice = alloc.device();
  d.localId = alloc.localId();
  if (alloc.kind() == MemKind::kLegacyCudaIpc) d.legacy = alloc.legacyHandle();
  *out = d;
  return ncclSuccess;
}

Status exportUserMem(const void* anchor, uintptr_t begin, uintptr_t end, UserMemExport* out) {
  WEFT_CHECK_ARG(anchor != nullptr && begin <= (uintptr_t)anchor && (uintptr_t)anchor < end && out != nullptr,
                 "exportUserMem: bad arguments (anchor %p, range [%#zx, %#zx))", anchor, (size_t)begin, (size_t)end);
  *out = UserMemExport();
  PointerFacts facts;
  WEFT_TRY(pointerFacts(anchor, &facts));
  if (facts.kind != MemoryKind::kDevice || facts.rangeBytes == 0) {
    out->why = "it is not device memory whose allocation the driver knows";
    return ncclSuccess;
  }
  out->begin = std::max(begin, facts.rangeBegin);
  out->bytes = std::min(end, facts.rangeBegin + facts.rangeBytes) - out->begin;
  IpcMemDesc& d = out->desc;
  std::memset(&d, 0, sizeof(d));
  d.magic = kIpcMemDescMagic;
  d.allocBytes = facts.rangeBytes;
  d.offset = out->begin - facts.rangeBegin;
  d.bytes = out->bytes;
  d.ownerPid = (int32_t)getpid();
  d.ownerDevice = facts.device;
#if WEFT_RUNTIME_CUMEM
  const DriverApi* api = nullptr;
  WEFT_TRY(driverApi(&api));
  CUmemGenericAllocationHandle handle = 0;
  if (api->cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(facts.rangeBegin)) == CUDA_SUCCESS) {
    // cuMem memory. A reservation holding several allocations (expandable segments) exports its
    // first one only, which the importer then fails to map over the whole range: it says so and
    // the transfers go through the connection buffers.
    int raw = -1;
    CUresult e = api->cuMemExportToShareableHandle(&raw, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    (void)api->cuMemRelease(handle);  // the retain's reference; the allocation lives on with its owner
    if (e != CUDA_SUCCESS) {
      out->why = "it is cuMem memory made without POSIX file descriptor handles";
      return ncclSuccess;
    }
    out->fd.reset(raw);
    d.kind = (uint32_t)MemKind::kCuMemFd;
    out->shareable = true;
    return ncclSuccess;
  }
#endif
  cudaIpcMemHandle_t h;
  if (cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(facts.rangeBegin)) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it so that no later call reports it
    out->why = "the driver gives no IPC handle for it (a pool allocation?)";
    return ncclSuccess;
  }
  d.kind = (uint32_t)MemKind::kLegacyCudaIpc;
  std::memcpy(d.legacy.bytes, &h, sizeof(h));
  out->shareable = true;
  return ncclSuccess;
}

Status checkIpcMemDesc(const IpcMemDesc& d, const char* from) {
  if (d.magic != kIpcMemDescMagic) {
    WEFT_WARN("memory descriptor from %s is not one (magic 0x%08x, expected 0x%08x): the peer runs a different "
              "library version or the data was corrupted", from, d.magic, kIpcMemDescMagic);
    return ncclInternalError;
  }
  if (d.kind != (uint32_t)MemKind::kCuMemFd && d.kind != (uint32_t)MemKind::kLegacyCudaIpc) {
    WEFT_WARN("memory descriptor from %s has unknown kind %u", from, d.kind);
    return ncclInternalError;
  }
  if (d.allocBytes == 0 || d.allocBytes > kMaxAllocBytes || d.offset > d.allocBytes ||
      d.bytes > d.allocBytes - d.offset) {
    WEFT_WARN("memory descriptor from %s is inconsistent: region [%llu, +%llu) of an allocation of %llu bytes",
              from, (unsigned long long)d.offset, (unsigned long long)d.bytes, (unsigned long long)d.allocBytes);
    return ncclInternalError;
  }
  if (d.ownerPid <= 0 || d.ownerDevice < 0) {
    WEFT_WARN("memory descriptor from %s names an impossible owner (pid %d, device %d)", from, d.ownerPid,
              d.ownerDevice);
    return ncclInternalError;
  }
  return ncclSuccess;
}

struct ImportedMemImpl {
#if WEFT_RUNTIME_CUMEM
  static Status cuMem(const IpcMemDesc& d, int fd, int device, const char* from, ImportedMem* m) {
    const DriverApi* api = nullptr;
    WEFT_TRY(driverApi(&api));
    CUmemAllocationProp prop;
    WEFT_TRY(cumem::allocationProp(*api, device, &prop));
    size_t gran = 0;
    WEFT_TRY(cumem::granularity(*api, prop, false, &gran));
    if (d.allocBytes % gran != 0) {
      WEFT_WARN("cuMem allocation from %s has %llu bytes, not a multiple of this device's granularity %zu: "
                "the GPUs differ in a way weft does not handle; set NCCL_CUMEM_ENABLE=0",
                from, (unsigned long long)d.allocBytes, gran);
      return ncclInternalError;
    }
    m->kind_ = MemKind::kCuMemFd;
    m->device_ = device;
    CUmemGenericAllocationHandle handle = 0;
    WEFT_CU_TRY(api->cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>((uintptr_t)fd),
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    m->handle_ = handle;
    CUdeviceptr va = 0;
    WEFT_CU_TRY(api->cuMemAddressReserve(&va, d.allocBytes, gran, 0, 0));
    m->va_ = va;
    m->reserved_ = d.allocBytes;
    WEFT_CU_TRY(api->cuMemMap(va, d.allocBytes, 0, handle, 0));
    m->mapped_ = true;
    WEFT_TRY(cumem::setAccess(*api, va, d.allocBytes, std::vector<int>{device}));
    m->base_ = reinterpret_cast<void*>(va);
    finish(d, m);
    return ncclSuccess;
  }
#else
  static Status cuMem(const IpcMemDesc&, int, int, const char* from, ImportedMem*) {
    WEFT_WARN("memory from %s is a cuMem allocation, which this HIP build cannot map (it shares memory through "
              "hipIpc handles only); every rank must run the same weft build", from);
    return ncclInvalidUsage;
  }
#endif

  // Callers take memory of their own process by its pointer (deciding by processHash: a pid alone
  // repeats across pid namespaces), so a handle here is another process's.
  static Status legacy(const IpcMemDesc& d, int device, const char* from, ImportedMem* m) {
    LegacyMappings& mappings = legacyMappings();
    std::lock_guard<std::mutex> lock(mappings.mutex);
    void* base = nullptr;
    for (LegacyMapping& lm : mappings.list) {
      if (lm.device == device && lm.ownerPid == d.ownerPid && sameHandle(lm.handle, d.legacy)) {
        base = lm.base;
        ++lm.users;
        break;
      }
    }
    if (base == nullptr) {
      cudaIpcMemHandle_t h;
      std::memcpy(&h, d.legacy.bytes, sizeof(h));
      WEFT_CUDA_TRY(cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess));
      mappings.list.push_back(LegacyMapping{device, d.ownerPid, d.legacy, base, 1});
    }
    m->kind_ = MemKind::kLegacyCudaIpc;
    m->device_ = device;
    m->base_ = base;
    finish(d, m);
    return ncclSuccess;
  }

  static void finish(const IpcMemDesc& d, ImportedMem* m) {
    m->ptr_ = static_cast<char*>(m->base_) + d.offset;
    m->bytes_ = d.bytes;
  }
};

Status importMem(const IpcMemDesc& desc, int fd, ImportedMem* out, const char* from) {
  WEFT_CHECK_ARG(out != nullptr, "importMem: out is NULL");
  WEFT_TRY(checkIpcMemDesc(desc, from));
  if (desc.kind == (uint32_t)MemKind::kCuMemFd && fd < 0) {
    WEFT_WARN("importMem: cuMem memory from %s needs the file descriptor its owner sends (got %d)", from, fd);
    return ncclInvalidArgument;
  }
  int device = -1;
  WEFT_TRY(getDevice(&device));
  WEFT_TRY(setDevice(device));  // makes the primary context current for the driver calls
  ImportedMem m;
  if (desc.kind == (uint32_t)MemKind::kCuMemFd) {
    WEFT_TRY(ImportedMemImpl::cuMem(desc, fd, device, from, &m));
  } else {
    WEFT_TRY(ImportedMemImpl::legacy(desc, device, from, &m));
  }
  WEFT_INFO(log::kP2p, "imported %s memory from %s (pid %d device %d, id %llu): %llu bytes at %p on device %d",
            memKindName(m.kind()), from, desc.ownerPid, desc.ownerDevice, (unsigned long long)desc.localId,
            (unsigned long long)desc.bytes, m.ptr(), device);
  *out = std::move(m);
  return ncclSuccess;
}

ImportedMem::ImportedMem(ImportedMem&& other) noexcept { *this = std::move(other); }

ImportedMem& ImportedMem::operator=(ImportedMem&& other) noexcept {
  if (this == &other) return *this;
  reset();
  ptr_ = std::exchange(other.ptr_, nullptr);
  bytes_ = std::exchange(other.bytes_, 0);
  kind_ = std::exchange(other.kind_, MemKind::kNone);
  device_ = std::exchange(other.device_, -1);
  base_ = std::exchange(other.base_, nullptr);
  handle_ = std::exchange(other.handle_, 0);
  va_ = std::exchange(other.va_, 0);
  reserved_ = std::exchange(other.reserved_, 0);
  mapped_ = std::exchange(other.mapped_, false);
  return *this;
}

void ImportedMem::reset() {
  if (kind_ == MemKind::kNone) return;
  ScopedDevice onDevice;
  if (onDevice.set(device_) == ncclSuccess) {
    if (kind_ == MemKind::kCuMemFd) {
#if WEFT_RUNTIME_CUMEM
      const DriverApi* api = nullptr;
      if (driverApi(&api) == ncclSuccess) cumem::releaseMapping(*api, va_, reserved_, mapped_, handle_);
#endif
    } else if (base_ != nullptr) {
      LegacyMappings& mappings = legacyMappings();
      std::lock_guard<std::mutex> lock(mappings.mutex);
      auto it = std::find_if(mappings.list.begin(), mappings.list.end(),
                             [&](const LegacyMapping& lm) { return lm.device == device_ && lm.base == base_; });
      if (it != mappings.list.end() && --it->users == 0) {
        mappings.list.erase(it);
        cudaError_t e = cudaIpcCloseMemHandle(base_);
        if (e != cudaSuccess) (void)detail::reportCudaError(e, "cudaIpcCloseMemHandle(base_)", __FILE__, __LINE__);
      }
    }
  }
  kind_ = MemKind::kNone;  // so that the assignment below does not come back here
  *this = ImportedMem();
}

}  // namespace weft::runtime
