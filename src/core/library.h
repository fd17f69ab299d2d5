// Process-wide state of the library: one-time initialisation and the last-error lookup.
#pragma once

#include "nccl.h"

namespace weft::core {

// First-use initialisation shared by the entry points that start real work (unique id, init):
// reads the debug settings and prints the version banner.
void initOnce();

// ncclGetLastError: the communicator's last warning if it has one, else this thread's, else the
// newest in the process.
const char* lastErrorText(ncclComm_t comm);

}  // namespace weft::core
