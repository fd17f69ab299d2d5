#include "runtime/flat_map.h"

#include "core/log.h"
#include "runtime/gpu.h"
#include "runtime/gpu_api.h"

#if WEFT_RUNTIME_CUMEM
#include "runtime/cumem.h"
#include "runtime/driver_api.h"
#endif

namespace weft::runtime {

#if WEFT_RUNTIME_CUMEM

Status FlatMapping::granularity(size_t* out) {
  const DriverApi* api = nullptr;
  WEFT_TRY(driverApi(&api));
  int device = -1;
  WEFT_TRY(getDevice(&device));
  CUmemAllocationProp prop;
  WEFT_TRY(cumem::allocationProp(*api, device, &prop));
  return cumem::granularity(*api, prop, false, out);
}

Status FlatMapping::reserve(int slots, size_t stride) {
  const DriverApi* api = nullptr;
  WEFT_TRY(driverApi(&api));
  WEFT_TRY(getDevice(&device_));
  size_t gran = 0;
  WEFT_TRY(granularity(&gran));
  if (slots <= 0 || stride == 0 || stride % gran != 0) {
    WEFT_WARN("flat mapping: %d slots of %zu bytes (granularity %zu) cannot be reserved", slots, stride, gran);
    return ncclInternalError;
  }
  CUdeviceptr va = 0;
  // Default alignment: the device code only adds whole strides to the base (a stride of 12 GiB is
  // no power of two, which an alignment would have to be).
  WEFT_CU_TRY(api->cuMemAddressReserve(&va, stride * (size_t)slots, 0, 0, 0));
  va_ = va;
  reserved_ = stride * (size_t)slots;
  stride_ = stride;
  slots_ = slots;
  return ncclSuccess;
}

Status FlatMapping::mapHandle(int slot, size_t at, unsigned long long handle, size_t allocBytes) {
  const DriverApi* api = nullptr;
  WEFT_TRY(driverApi(&api));
  Piece piece;
  piece.handle = handle;  // released by the destructor from here on
  pieces_.push_back(piece);
  if (slot < 0 || slot >= slots_ || at + allocBytes > stride_) {
    WEFT_WARN("flat mapping: %zu bytes at %zu do not fit slot %d of %zu bytes", allocBytes, at, slot, stride_);
    return ncclInternalError;
  }
  const CUdeviceptr va = va_ + (CUdeviceptr)(stride_ * (size_t)slot + at);
  WEFT_CU_TRY(api->cuMemMap(va, allocBytes, 0, (CUmemGenericAllocationHandle)handle, 0));
  pieces_.back().va = va;
  pieces_.back().bytes = allocBytes;
  return cumem::setAccess(*api, va, allocBytes, std::vector<int>{device_});
}

Status FlatMapping::mapFd(int slot, size_t at, int fd, size_t allocBytes, const char* from) {
  const DriverApi* api = nullptr;
  WEFT_TRY(driverApi(&api));
  CUmemGenericAllocationHandle handle = 0;
  CUresult r = api->cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>((uintptr_t)fd),
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS) {
    WEFT_WARN("flat mapping: the allocation %s sent could not be imported (CUDA driver error %d)", from, (int)r);
    return ncclUnhandledCudaError;
  }
  return mapHandle(slot, at, handle, allocBytes);
}

Status FlatMapping::mapOwn(int slot, size_t at, const void* allocBase, size_t allocBytes) {
  const DriverApi* api = nullptr;
  WEFT_TRY(driverApi(&api));
  CUmemGenericAllocationHandle handle = 0;
  WEFT_CU_TRY(api->cuMemRetainAllocationHandle(&handle, const_cast<void*>(allocBase)));
  return mapHandle(slot, at, handle, allocBytes);
}

FlatMapping::~FlatMapping() {
  if (va_ == 0 && pieces_.empty()) return;
  const DriverApi* api = nullptr;
  if (driverApi(&api) != ncclSuccess) return;
  ScopedDevice onDevice;
  if (device_ >= 0 && onDevice.set(device_) != ncclSuccess) return;
  // Pieces lie inside the one reservation: unmapped and released each, the range freed once.
  for (const Piece& p : pieces_) {
    if (p.va != 0 && api->cuMemUnmap(p.va, p.bytes) != CUDA_SUCCESS) WEFT_WARN("flat mapping: cuMemUnmap failed");
    if (p.handle != 0 && api->cuMemRelease(p.handle) != CUDA_SUCCESS) WEFT_WARN("flat mapping: cuMemRelease failed");
  }
  if (va_ != 0) cumem::releaseMapping(*api, va_, reserved_, false, 0);
}

#else  // HIP: no cuMem

Status FlatMapping::granularity(size_t* out) {
  *out = 0;
  WEFT_WARN("flat mappings (NCCL's device API windows) need cuMem, which this build does not use");
  return ncclInvalidUsage;
}
Status FlatMapping::reserve(int, size_t) { return granularity(&stride_); }
Status FlatMapping::mapHandle(int, size_t, unsigned long long, size_t) { return ncclInvalidUsage; }
Status FlatMapping::mapFd(int, size_t, int, size_t, const char*) { return ncclInvalidUsage; }
Status FlatMapping::mapOwn(int, size_t, const void*, size_t) { return ncclInvalidUsage; }
FlatMapping::~FlatMapping() = default;

#endif

}  // namespace weft::runtime
