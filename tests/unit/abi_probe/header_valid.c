/* Compiled as C with -Wall -Wextra -Werror -pedantic against weft's nccl.h: the header must be valid
 * C (C clients such as IREE and CuPy's shim include it from C). Building is the test. */
#include <nccl.h>

#ifndef WEFT_VERSION_STRING
#error "header_valid.c must see weft's nccl.h"
#endif

int weftHeaderValidC(void);
int weftHeaderValidC(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclUniqueId id;
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = ncclAllReduce;
  id.internal[0] = 0;
  return (int)config.size + (int)sim.size + id.internal[0] + (allReduce != 0);
}
