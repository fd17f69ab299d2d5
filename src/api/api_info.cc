// Entry points that need no communicator: versions, error strings, last error, debug reset.
#include "api/export.h"
#include "core/library.h"
#include "core/version.h"

WEFT_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) {
    WEFT_WARN("ncclGetVersion: argument 'version' is NULL");
    return ncclInvalidArgument;
  }
  *version = weft::version::kNcclCode;
  return ncclSuccess;
}

WEFT_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (weft::api::enumArg(result)) {  // any integer may come here
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the weft developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

WEFT_API(const char*, ncclGetLastError, ncclComm_t comm) {
  return weft::core::lastErrorText(comm);
}

// Not part of the API, but exported by NCCL as a plain global; kept for programs that found it.
extern "C" WEFT_EXPORT void ncclResetDebugInitInternal() { weft::log::reset(); }

WEFT_API(void, ncclResetDebugInit) { weft::log::reset(); }
