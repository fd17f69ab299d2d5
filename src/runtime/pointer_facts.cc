#include "runtime/pointer_facts.h"

#include "runtime/cuda_check.h"
#include "runtime/gpu_api.h"
#if !defined(WEFT_GPU_HIP)
#include "runtime/driver_api.h"
#endif

namespace weft::runtime {

#if defined(WEFT_GPU_HIP)

Status pointerFacts(const void* ptr, PointerFacts* out) {
  WEFT_CHECK_ARG(out != nullptr, "pointerFacts: out is NULL");
  *out = PointerFacts{};
  hipPointerAttribute_t attr;
  if (hipPointerGetAttributes(&attr, ptr) != hipSuccess) {
    (void)hipGetLastError();  // HIP answers an error for memory it does not know
    return ncclSuccess;
  }
  if (attr.isManaged) {
    out->kind = MemoryKind::kManaged;
  } else if (attr.memoryType == hipMemoryTypeDevice) {
    out->kind = MemoryKind::kDevice;
    out->device = attr.device;
  } else if (attr.memoryType == hipMemoryTypeHost) {
    out->kind = MemoryKind::kHostPinned;
    return ncclSuccess;  // hipMemGetAddressRange knows device allocations only
  } else {
    return ncclSuccess;
  }
  hipDeviceptr_t base = nullptr;
  size_t bytes = 0;
  if (hipMemGetAddressRange(&base, &bytes, const_cast<void*>(ptr)) == hipSuccess) {
    out->rangeBegin = (uintptr_t)base;
    out->rangeBytes = bytes;
  } else {
    (void)hipGetLastError();
  }
  return ncclSuccess;
}

#else

Status pointerFacts(const void* ptr, PointerFacts* out) {
  WEFT_CHECK_ARG(out != nullptr, "pointerFacts: out is NULL");
  *out = PointerFacts{};
  const DriverApi* api = nullptr;
  WEFT_TRY(driverApi(&api));
  // One query for all five (the range is the whole reservation for cuMem memory, so a buffer that
  // spans several mapped chunks, as PyTorch's expandable segments make, is not refused).
  CUmemorytype type = (CUmemorytype)0;
  int ordinal = -1;
  CUdeviceptr begin = 0;
  size_t bytes = 0;
  unsigned int managed = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* values[] = {&type, &ordinal, &begin, &bytes, &managed};
  WEFT_CU_TRY(api->cuPointerGetAttributes(5, attrs, values, (CUdeviceptr)ptr));
  if (managed) {
    out->kind = MemoryKind::kManaged;
  } else if (type == CU_MEMORYTYPE_DEVICE) {
    out->kind = MemoryKind::kDevice;
    out->device = ordinal;
  } else if (type == CU_MEMORYTYPE_HOST) {
    out->kind = MemoryKind::kHostPinned;
  } else {
    return ncclSuccess;  // unknown memory has no range
  }
  out->rangeBegin = (uintptr_t)begin;
  out->rangeBytes = bytes;
  return ncclSuccess;
}

#endif

Status pageableMemoryAccess(int device, bool* out) {
  WEFT_CHECK_ARG(out != nullptr, "pageableMemoryAccess: out is NULL");
  int value = 0;
#if defined(WEFT_GPU_HIP)
  WEFT_CUDA_TRY(hipDeviceGetAttribute(&value, hipDeviceAttributePageableMemoryAccess, device));
#else
  WEFT_CUDA_TRY(cudaDeviceGetAttribute(&value, cudaDevAttrPageableMemoryAccess, device));
#endif
  *out = value != 0;
  return ncclSuccess;
}

}  // namespace weft::runtime
