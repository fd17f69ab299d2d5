// Status codes and the few macros that propagate them. Internal functions return Status
// (= ncclResult_t) marked [[nodiscard]]; no exception crosses the C ABI (see api/export.h).
#pragma once

#include <cerrno>
#include <cstring>

#include "nccl.h"
#include "core/log.h"

namespace weft {

using Status = ncclResult_t;

// True for the results that mean "stop and report": everything but success and in-progress.
constexpr bool isError(Status s) { return s != ncclSuccess && s != ncclInProgress; }

}  // namespace weft

// Propagates an error to the caller and leaves a file:line trail at INFO level, like a backtrace.
#define WEFT_TRY(expr)                                                                    \
  do {                                                                                    \
    ::weft::Status weft_try_status_ = (expr);                                             \
    if (::weft::isError(weft_try_status_)) {                                              \
      WEFT_INFO(::weft::log::kAll, "%s:%d -> %d", __FILE__, __LINE__, (int)weft_try_status_); \
      return weft_try_status_;                                                            \
    }                                                                                     \
  } while (0)

// Runs a system call returning -1/errno, retrying on EINTR; any other failure is logged with the
// call text and strerror and returns ncclSystemError.
#define WEFT_SYS_TRY(call)                                                                \
  do {                                                                                    \
    int weft_sys_rc_;                                                                     \
    do { weft_sys_rc_ = (int)(call); } while (weft_sys_rc_ == -1 && errno == EINTR);      \
    if (weft_sys_rc_ == -1) {                                                             \
      WEFT_WARN("%s failed: %s", #call, strerror(errno));                                 \
      return ncclSystemError;                                                             \
    }                                                                                     \
  } while (0)

// Argument checks at the public boundary: the message must name the argument and the function.
#define WEFT_CHECK_ARG(cond, ...)                                                         \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      WEFT_WARN(__VA_ARGS__);                                                             \
      return ncclInvalidArgument;                                                         \
    }                                                                                     \
  } while (0)

// Invariants that only a bug can break; on failure: log and report an internal error.
#define WEFT_ASSERT(cond)                                                                 \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      WEFT_WARN("internal check failed: %s (%s:%d)", #cond, __FILE__, __LINE__);         \
      return ncclInternalError;                                                           \
    }                                                                                     \
  } while (0)
