// The CUDA driver entry points weft uses, obtained from the CUDA runtime at first use
// (cudaGetDriverEntryPointByVersion) instead of linking libcuda: the library then loads, and fails
// with a clear message, on machines without a driver. For use inside src/runtime/ only.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "core/status.h"

namespace weft::runtime {

// Each pointer has the ABI version named in its type; the runtime hands out that version.
struct DriverApi {
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange = nullptr;
  PFN_cuPointerGetAttributes_v7000 cuPointerGetAttributes = nullptr;
  PFN_cuMemCreate_v10020 cuMemCreate = nullptr;
  PFN_cuMemRelease_v10020 cuMemRelease = nullptr;
  PFN_cuMemAddressReserve_v10020 cuMemAddressReserve = nullptr;
  PFN_cuMemAddressFree_v10020 cuMemAddressFree = nullptr;
  PFN_cuMemMap_v10020 cuMemMap = nullptr;
  PFN_cuMemUnmap_v10020 cuMemUnmap = nullptr;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 cuMemExportToShareableHandle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 cuMemImportFromShareableHandle = nullptr;
  PFN_cuMemRetainAllocationHandle_v11000 cuMemRetainAllocationHandle = nullptr;
};

// The resolved table. Resolution runs once; a failure (no driver, driver too old) is remembered and
// every later call fails the same way, with a WARN naming the cause.
[[nodiscard]] Status driverApi(const DriverApi** out);

namespace detail {
// Logs a failed driver call (call text, CUresult name and text) at the caller's file:line and
// returns ncclUnhandledCudaError.
[[nodiscard]] Status reportCuError(CUresult result, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace weft::runtime

#define WEFT_CU_TRY(call)                                                                   \
  do {                                                                                      \
    CUresult weft_cu_res_ = (call);                                                         \
    if (weft_cu_res_ != CUDA_SUCCESS)                                                       \
      return ::weft::runtime::detail::reportCuError(weft_cu_res_, #call, __FILE__, __LINE__); \
  } while (0)
