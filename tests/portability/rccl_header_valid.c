/* The HIP build's header, included the three ways programs include RCCL's. Compiling is the check;
 * the signature checks below fail to compile if a declaration changes type. */
#include <rccl/rccl.h>
#include <rccl.h>
#include <nccl.h>

#if !defined(RCCL_ALLTOALLV) || !defined(RCCL_GATHER_SCATTER) || !defined(RCCL_BFLOAT16)
#error "RCCL feature macros missing"
#endif

typedef ncclResult_t (*AllToAllvFn)(const void*, const size_t[], const size_t[], void*, const size_t[],
                                    const size_t[], ncclDataType_t, ncclComm_t, hipStream_t);
typedef ncclResult_t (*AllToAllFn)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, hipStream_t);
typedef ncclResult_t (*AllReduceFn)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                    hipStream_t);

AllToAllvFn weftCheckAllToAllv = ncclAllToAllv;
AllToAllvFn weftCheckAlltoAllv = ncclAlltoAllv;
AllToAllFn weftCheckAllToAll = ncclAllToAll;
AllReduceFn weftCheckAllReduce = ncclAllReduce;
