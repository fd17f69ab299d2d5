// Error mapping for CUDA runtime calls, for use inside src/runtime/ only.
#pragma once

#include "runtime/gpu_api.h"

#include "core/status.h"

namespace weft::runtime::detail {

// Clears the runtime's last error (so a later, unrelated check does not see it), logs a WARN at the
// caller's file:line naming the call, the error name and text and a remedy where one is known, and
// returns ncclUnhandledCudaError.
[[nodiscard]] Status reportCudaError(cudaError_t error, const char* call, const char* file, int line);

// A remedy for the errors users commonly hit, or "" when there is nothing useful to add.
const char* cudaErrorHint(cudaError_t error);

}  // namespace weft::runtime::detail

#define WEFT_CUDA_TRY(call)                                                                 \
  do {                                                                                      \
    cudaError_t weft_cuda_err_ = (call);                                                    \
    if (weft_cuda_err_ != cudaSuccess)                                                      \
      return ::weft::runtime::detail::reportCudaError(weft_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)
