// Checks every communicator entry point makes on its comm argument.
#pragma once

#include "core/status.h"

struct ncclComm;

namespace weft::core {

// comm is non-NULL, a live weft communicator, fully created and not failed or aborted.
[[nodiscard]] Status checkCommUsable(ncclComm* comm, const char* fn);

// comm may be the parent of ncclCommSplit / ncclCommShrink: usable, or revoked (ncclCommRevoke),
// or (mayHaveFailed: ncclCommShrink, which decides what to do about it) failed.
[[nodiscard]] Status checkCommParent(ncclComm* comm, const char* fn, bool mayHaveFailed);

// comm is non-NULL and a live weft communicator (creation may still be running).
[[nodiscard]] Status checkCommHandle(ncclComm* comm, const char* fn);

// `type` (an ncclDataType_t argument read as an integer: api/export.h enumArg) names a datatype.
[[nodiscard]] Status checkDataType(int type, const char* fn);

}  // namespace weft::core
