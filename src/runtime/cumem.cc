#include "runtime/cumem.h"

#include <atomic>

#include "core/param.h"
#include "runtime/shareable_alloc.h"

namespace weft::runtime {
namespace cumem {

Status allocationProp(const DriverApi& api, int device, CUmemAllocationProp* out) {
  CUdevice cuDev = 0;
  WEFT_CU_TRY(api.cuDeviceGet(&cuDev, device));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cuDev;
  // Network transports register this memory with the NIC; that needs the flag at creation time.
  int rdma = 0;
  if (api.cuDeviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, cuDev) !=
      CUDA_SUCCESS) {
    rdma = 0;
  }
  prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
  *out = prop;
  return ncclSuccess;
}

Status granularity(const DriverApi& api, const CUmemAllocationProp& prop, bool recommended, size_t* out) {
  size_t g = 0;
  WEFT_CU_TRY(api.cuMemGetAllocationGranularity(
      &g, &prop, recommended ? CU_MEM_ALLOC_GRANULARITY_RECOMMENDED : CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  WEFT_ASSERT(g > 0);
  *out = g;
  return ncclSuccess;
}

Status setAccess(const DriverApi& api, CUdeviceptr va, size_t bytes, const std::vector<int>& devices) {
  std::vector<CUmemAccessDesc> descs;
  for (int d : devices) {
    CUdevice cuDev = 0;
    WEFT_CU_TRY(api.cuDeviceGet(&cuDev, d));
    CUmemAccessDesc desc = {};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = cuDev;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    descs.push_back(desc);
  }
  WEFT_CU_TRY(api.cuMemSetAccess(va, bytes, descs.data(), descs.size()));
  return ncclSuccess;
}

}  // namespace cumem

Status cuMemUsable(int device, bool* usable) {
  *usable = false;
  int64_t mode = param::getInt("NCCL_CUMEM_ENABLE", -2);
  if (mode == 0) return ncclSuccess;
  const DriverApi* api = nullptr;
  WEFT_TRY(driverApi(&api));
  CUdevice cuDev = 0;
  WEFT_CU_TRY(api->cuDeviceGet(&cuDev, device));
  int vmm = 0, posixFd = 0;
  WEFT_CU_TRY(api->cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cuDev));
  WEFT_CU_TRY(
      api->cuDeviceGetAttribute(&posixFd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, cuDev));
  *usable = vmm != 0 && posixFd != 0;
  if (!*usable && mode > 0) {
    static std::atomic<bool> warned{false};  // once per process is enough; the fallback works
    if (!warned.exchange(true)) {
      WEFT_WARN("NCCL_CUMEM_ENABLE=%lld but device %d does not support cuMem%s; using cudaMalloc and legacy "
                "CUDA IPC instead",
                (long long)mode, device, vmm ? " with POSIX file descriptors" : "");
    }
  }
  return ncclSuccess;
}

namespace cumem {

void releaseMapping(const DriverApi& api, CUdeviceptr va, size_t bytes, bool mapped,
                    CUmemGenericAllocationHandle handle) {
  if (mapped && api.cuMemUnmap(va, bytes) != CUDA_SUCCESS) WEFT_WARN("cuMemUnmap(0x%llx) failed", (unsigned long long)va);
  if (va != 0 && api.cuMemAddressFree(va, bytes) != CUDA_SUCCESS) {
    WEFT_WARN("cuMemAddressFree(0x%llx) failed", (unsigned long long)va);
  }
  if (handle != 0 && api.cuMemRelease(handle) != CUDA_SUCCESS) WEFT_WARN("cuMemRelease failed");
}

}  // namespace cumem
}  // namespace weft::runtime
