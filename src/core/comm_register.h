// ncclCommRegister / ncclCommDeregister: the checks and the bookkeeping behind the two calls.
// As NCCL: device, managed and pinned host memory get a handle (NCCL 2.28.9 gives pinned host
// memory one too); NCCL_LOCAL_REGISTER=0 and size 0 give a NULL handle and success (registration
// is a hint), and deregistering NULL does nothing. Unlike NCCL, a buffer no collective could use
// (unknown to the driver, another GPU's, running past its allocation) is refused with
// ncclInvalidArgument naming it, where NCCL accepts it or fails a driver query.
#pragma once

#include <cstddef>

#include "core/status.h"

struct ncclComm;

namespace weft::core {

// `fn` names the public call in messages (ncclCommWindowRegister registers through these too).
[[nodiscard]] Status registerBuffer(ncclComm* comm, void* buff, size_t size, void** handle,
                                    const char* fn = "ncclCommRegister");
[[nodiscard]] Status deregisterBuffer(ncclComm* comm, void* handle, const char* fn = "ncclCommDeregister");

}  // namespace weft::core
