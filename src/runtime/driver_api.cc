#include "runtime/driver_api.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <mutex>

#include "core/log.h"
#include "runtime/cuda_check.h"

namespace weft::runtime {
namespace {

struct Resolved {
  DriverApi api;
  Status status = ncclSuccess;
  char error[512] = "";
};

template <typename Fn>
Status resolve(const char* symbol, unsigned version, Fn* out, char* error, size_t errorBytes) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &query);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    int drv = 0;
    (void)cudaDriverGetVersion(&drv);
    snprintf(error, errorBytes,
             "the CUDA driver API is unavailable: cudaGetDriverEntryPointByVersion(%s) failed with %s (%s) "
             "[driver version %d, 0 = no NVIDIA driver found]. %s",
             symbol, cudaGetErrorName(e), cudaGetErrorString(e), drv, detail::cudaErrorHint(e));
    return ncclUnhandledCudaError;
  }
  if (query != cudaDriverEntryPointSuccess || fn == nullptr) {
    snprintf(error, errorBytes,
             "the CUDA driver does not provide %s (ABI version %u; query result %d): update the NVIDIA driver",
             symbol, version, (int)query);
    return ncclUnhandledCudaError;
  }
  *out = reinterpret_cast<Fn>(fn);
  return ncclSuccess;
}

Status resolveAll(DriverApi* api, char* error, size_t bytes) {
#define WEFT_RESOLVE(name, version) WEFT_TRY(resolve(#name, version, &api->name, error, bytes))
  WEFT_RESOLVE(cuGetErrorName, 6000);
  WEFT_RESOLVE(cuGetErrorString, 6000);
  WEFT_RESOLVE(cuDriverGetVersion, 2020);
  WEFT_RESOLVE(cuDeviceGet, 2000);
  WEFT_RESOLVE(cuDeviceGetAttribute, 2000);
  WEFT_RESOLVE(cuMemGetAddressRange, 3020);
  WEFT_RESOLVE(cuPointerGetAttributes, 7000);
  WEFT_RESOLVE(cuMemCreate, 10020);
  WEFT_RESOLVE(cuMemRelease, 10020);
  WEFT_RESOLVE(cuMemAddressReserve, 10020);
  WEFT_RESOLVE(cuMemAddressFree, 10020);
  WEFT_RESOLVE(cuMemMap, 10020);
  WEFT_RESOLVE(cuMemUnmap, 10020);
  WEFT_RESOLVE(cuMemSetAccess, 10020);
  WEFT_RESOLVE(cuMemGetAllocationGranularity, 10020);
  WEFT_RESOLVE(cuMemExportToShareableHandle, 10020);
  WEFT_RESOLVE(cuMemRetainAllocationHandle, 11000);
  WEFT_RESOLVE(cuMemImportFromShareableHandle, 10020);
#undef WEFT_RESOLVE
  return ncclSuccess;
}

Resolved& resolved() {
  static Resolved* r = [] {
    auto* res = new Resolved();  // never destroyed: frees during exit may still need the table
    res->status = resolveAll(&res->api, res->error, sizeof(res->error));
    if (res->status == ncclSuccess) WEFT_INFO(log::kInit, "CUDA driver entry points resolved");
    return res;
  }();
  return *r;
}

}  // namespace

Status driverApi(const DriverApi** out) {
  Resolved& r = resolved();
  if (r.status != ncclSuccess) {
    WEFT_WARN("%s", r.error);
    return r.status;
  }
  *out = &r.api;
  return ncclSuccess;
}

namespace detail {

Status reportCuError(CUresult result, const char* call, const char* file, int line) {
  const char* name = "unknown CUresult";
  const char* text = "";
  Resolved& r = resolved();
  if (r.status == ncclSuccess) {
    if (r.api.cuGetErrorName(result, &name) != CUDA_SUCCESS) name = "unknown CUresult";
    if (r.api.cuGetErrorString(result, &text) != CUDA_SUCCESS) text = "";
  }
  const char* hint = "";
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    hint = ". The GPU is out of memory: free memory in the application or lower NCCL_BUFFSIZE";
  } else if (result == CUDA_ERROR_NOT_SUPPORTED) {
    hint = ". This driver or GPU does not support the operation; NCCL_CUMEM_ENABLE=0 uses cudaMalloc and "
           "legacy CUDA IPC instead";
  }
  log::write(log::Level::Warn, log::kAll, file, line, "CUDA driver call %s failed: %s %d (%s)%s", call, name,
             (int)result, text, hint);
  return ncclUnhandledCudaError;
}

}  // namespace detail
}  // namespace weft::runtime
