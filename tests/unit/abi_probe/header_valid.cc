// Compiled as C++ with -Wall -Wextra -Werror against weft's nccl.h, next to header_valid.c.
// Building is the test.
#include <nccl.h>

#ifndef WEFT_VERSION_STRING
#error "header_valid.cc must see weft's nccl.h"
#endif

int weftHeaderValidCxx() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = ncclAllReduce;
  return static_cast<int>(config.size + sim.size) + (allReduce != nullptr);
}
