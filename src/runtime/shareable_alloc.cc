#include "runtime/shareable_alloc.h"

#include "runtime/gpu_api.h"

#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "core/log.h"
#include "runtime/block_pool.h"
#include "runtime/cuda_check.h"
#include "runtime/gpu.h"
#include "runtime/mem_tally.h"
#if WEFT_RUNTIME_CUMEM
#include "runtime/cumem.h"
#include "runtime/driver_api.h"
#endif

namespace weft::runtime {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(LegacyIpcHandle), "legacy IPC handle size changed");

const char* memKindName(MemKind kind) {
  switch (kind) {
    case MemKind::kCuMemFd: return "cuMem (POSIX fd)";
    case MemKind::kLegacyCudaIpc: return "cudaMalloc (legacy CUDA IPC)";
    default: return "none";
  }
}

struct ShareableAllocImpl {
  static void setLocalId(ShareableAlloc* a) {
    static std::atomic<uint64_t> next{1};
    a->localId_ = next.fetch_add(1, std::memory_order_relaxed);
  }
  static void setFreeWhenSafe(ShareableAlloc* a, bool on) { a->freeWhenSafe_ = on; }

  // Devices other than the owner that may map `device`'s memory (P2P-capable peers).
  static Status accessors(int device, std::vector<int>* out) {
    int n = 0;
    WEFT_TRY(deviceCount(&n));
    out->assign(1, device);
    for (int d = 0; d < n; ++d) {
      if (d == device) continue;
      bool can = false;
      WEFT_TRY(canAccessPeer(d, device, &can));
      if (can) out->push_back(d);
    }
    return ncclSuccess;
  }

#if WEFT_RUNTIME_CUMEM
  // Builds into `a`; on failure `a`'s destructor releases whatever was acquired.
  static Status cuMem(int device, size_t bytes, bool recommended, ShareableAlloc* a) {
    const DriverApi* api = nullptr;
    WEFT_TRY(driverApi(&api));
    CUmemAllocationProp prop;
    WEFT_TRY(cumem::allocationProp(*api, device, &prop));
    size_t gran = 0;
    WEFT_TRY(cumem::granularity(*api, prop, recommended, &gran));
    size_t size = cumem::roundUp(bytes, gran);
    a->device_ = device;
    a->kind_ = MemKind::kCuMemFd;
    CUmemGenericAllocationHandle handle = 0;
    WEFT_CU_TRY(api->cuMemCreate(&handle, size, &prop, 0));
    a->handle_ = handle;
    CUdeviceptr va = 0;
    WEFT_CU_TRY(api->cuMemAddressReserve(&va, size, gran, 0, 0));
    a->va_ = va;
    a->bytes_ = size;
    WEFT_CU_TRY(api->cuMemMap(va, size, 0, handle, 0));
    a->mapped_ = true;
    std::vector<int> devices;
    WEFT_TRY(accessors(device, &devices));
    WEFT_TRY(cumem::setAccess(*api, va, size, devices));
    a->ptr_ = reinterpret_cast<void*>(va);
    WEFT_INFO(log::kAlloc, "cuMem allocation of %zu bytes (asked %zu, granularity %zu) on device %d at %p, "
              "accessible from %zu device(s)", size, bytes, gran, device, a->ptr_, devices.size());
    return ncclSuccess;
  }
#else
  static Status cuMem(int device, size_t, bool, ShareableAlloc*) {
    WEFT_WARN("cuMem allocations were requested on device %d, but this HIP build shares memory only through "
              "hipIpc handles (see runtime/gpu_api.h)", device);
    return ncclInvalidUsage;
  }
#endif

  static Status legacy(int device, size_t bytes, bool wantHandle, ShareableAlloc* a) {
    void* p = nullptr;
#if defined(WEFT_GPU_HIP)
    // Fine-grained memory: the peers' connection buffers and tail/head counters in it are polled
    // by kernels on other GPUs while this GPU's kernel writes them; coarse-grained hipMalloc
    // memory is only made coherent at kernel boundaries.
    WEFT_CUDA_TRY(hipExtMallocWithFlags(&p, bytes, hipDeviceMallocFinegrained));
#else
    WEFT_CUDA_TRY(cudaMalloc(&p, bytes));
#endif
    a->device_ = device;
    a->kind_ = MemKind::kLegacyCudaIpc;
    a->ptr_ = p;
    a->bytes_ = bytes;
    if (wantHandle) {
      cudaIpcMemHandle_t h;
      WEFT_CUDA_TRY(cudaIpcGetMemHandle(&h, p));
      std::memcpy(a->legacy_.bytes, &h, sizeof(h));
    }
    WEFT_INFO(log::kAlloc, "cudaMalloc of %zu bytes on device %d at %p (legacy CUDA IPC)", bytes, device, p);
    return ncclSuccess;
  }
};

ShareableAlloc::ShareableAlloc(ShareableAlloc&& other) noexcept { *this = std::move(other); }

ShareableAlloc& ShareableAlloc::operator=(ShareableAlloc&& other) noexcept {
  if (this == &other) return *this;
  reset();
  ptr_ = std::exchange(other.ptr_, nullptr);
  bytes_ = std::exchange(other.bytes_, 0);
  kind_ = std::exchange(other.kind_, MemKind::kNone);
  device_ = std::exchange(other.device_, -1);
  localId_ = std::exchange(other.localId_, 0);
  handle_ = std::exchange(other.handle_, 0);
  va_ = std::exchange(other.va_, 0);
  mapped_ = std::exchange(other.mapped_, false);
  freeWhenSafe_ = std::exchange(other.freeWhenSafe_, false);
  legacy_ = std::exchange(other.legacy_, LegacyIpcHandle{});
  return *this;
}

void ShareableAlloc::reset() {
  if (kind_ == MemKind::kNone) return;
  tallyRelease(ptr_);  // its communicator has given it up, even where the free itself waits
  ScopedDevice onOwner;
  if (onOwner.set(device_) == ncclSuccess) {
    if (kind_ == MemKind::kCuMemFd) {
#if WEFT_RUNTIME_CUMEM
      const DriverApi* api = nullptr;
      if (driverApi(&api) == ncclSuccess) cumem::releaseMapping(*api, va_, bytes_, mapped_, handle_);
#endif
    } else if (ptr_ != nullptr && freeWhenSafe_) {
      // Connection memory: cudaFree waits for the device, whose kernels may wait for another rank of
      // this process (block_pool.h: releaseWhenSafe).
      releaseWhenSafe(
          [ptr = ptr_, device = device_] {
            ScopedDevice on;
            if (on.set(device) == ncclSuccess) (void)deviceFree(ptr);
          },
          bytes_);
    } else if (ptr_ != nullptr) {
      (void)deviceFree(ptr_);
    }
  }
  kind_ = MemKind::kNone;  // so that the assignment below does not come back here
  *this = ShareableAlloc();
}

Status ShareableAlloc::exportFd(util::UniqueFd* out) const {
  if (kind_ != MemKind::kCuMemFd) {
    WEFT_WARN("exportFd: allocation %llu is %s, not cuMem; it has no file descriptor",
              (unsigned long long)localId_, memKindName(kind_));
    return ncclInternalError;
  }
#if WEFT_RUNTIME_CUMEM
  const DriverApi* api = nullptr;
  WEFT_TRY(driverApi(&api));
  int fd = -1;
  WEFT_CU_TRY(api->cuMemExportToShareableHandle(&fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  out->reset(fd);
  return ncclSuccess;
#else
  (void)out;
  return ncclInternalError;  // unreachable: the HIP build makes no cuMem allocations
#endif
}

Status allocShareable(size_t bytes, ShareableAlloc* out, const ShareableOptions& options) {
  WEFT_CHECK_ARG(out != nullptr, "allocShareable: out is NULL");
  WEFT_CHECK_ARG(bytes > 0, "allocShareable: size is 0");
  int device = -1;
  WEFT_TRY(getDevice(&device));
  WEFT_TRY(setDevice(device));  // makes the device's primary context current for the driver calls
  bool useCuMem = false;
  if (options.kind == KindRequest::kAuto) {
    WEFT_TRY(cuMemUsable(device, &useCuMem));
  } else if (options.kind == KindRequest::kCuMem) {
    useCuMem = true;
  }
  ShareableAlloc a;
  if (useCuMem) {
    WEFT_TRY(ShareableAllocImpl::cuMem(device, bytes, options.recommendedGranularity, &a));
  } else {
    WEFT_TRY(ShareableAllocImpl::legacy(device, bytes, options.legacyHandle, &a));
  }
  ShareableAllocImpl::setLocalId(&a);
  ShareableAllocImpl::setFreeWhenSafe(&a, options.freeWhenSafe);
  tallyAllocation(a.ptr(), MemPlace::kGpu, a.bytes());
  *out = std::move(a);
  return ncclSuccess;
}

}  // namespace weft::runtime
