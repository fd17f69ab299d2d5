// Entry points whose features are not built yet. Each still exists (clients resolve every name at
// load time) and answers ncclInvalidUsage with a last-error text naming itself. The README lists
// them; move a name out of here when its feature lands.
#include "api/export.h"

using weft::api::notImplemented;

#define WEFT_PENDING(name, why, ...) \
  WEFT_API(ncclResult_t, name, __VA_ARGS__) { return notImplemented(#name, why); }

WEFT_PENDING(ncclCommInitRankConfig, "communicators are not built yet", ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config)
WEFT_PENDING(ncclCommInitRank, "communicators are not built yet", ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank)
WEFT_PENDING(ncclCommInitAll, "communicators are not built yet", ncclComm_t* comm, int ndev, const int* devlist)
WEFT_PENDING(ncclCommInitRankScalable, "communicators are not built yet", ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config)
WEFT_PENDING(ncclCommFinalize, "communicators are not built yet", ncclComm_t comm)
WEFT_PENDING(ncclCommDestroy, "communicators are not built yet", ncclComm_t comm)
WEFT_PENDING(ncclCommAbort, "communicators are not built yet", ncclComm_t comm)
WEFT_PENDING(ncclCommRevoke, "communicator revocation", ncclComm_t comm, int revokeFlags)
WEFT_PENDING(ncclCommSplit, "communicators are not built yet", ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config)
WEFT_PENDING(ncclCommShrink, "communicator shrinking", ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags)
WEFT_PENDING(ncclCommGetAsyncError, "communicators are not built yet", ncclComm_t comm, ncclResult_t* asyncError)
WEFT_PENDING(ncclCommCount, "communicators are not built yet", const ncclComm_t comm, int* count)
WEFT_PENDING(ncclCommCuDevice, "communicators are not built yet", const ncclComm_t comm, int* device)
WEFT_PENDING(ncclCommUserRank, "communicators are not built yet", const ncclComm_t comm, int* rank)
WEFT_PENDING(ncclCommRegister, "buffer registration", const ncclComm_t comm, void* buff, size_t size, void** handle)
WEFT_PENDING(ncclCommDeregister, "buffer registration", const ncclComm_t comm, void* handle)
WEFT_PENDING(ncclCommWindowRegister, "symmetric windows", ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags)
WEFT_PENDING(ncclCommWindowDeregister, "symmetric windows", ncclComm_t comm, ncclWindow_t win)
WEFT_PENDING(ncclRedOpCreatePreMulSum, "communicators are not built yet", ncclRedOp_t* op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm)
WEFT_PENDING(ncclRedOpDestroy, "communicators are not built yet", ncclRedOp_t op, ncclComm_t comm)
WEFT_PENDING(ncclReduce, "the data path is not built yet", const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclBcast, "the data path is not built yet", void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclBroadcast, "the data path is not built yet", const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclAllReduce, "the data path is not built yet", const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclReduceScatter, "the data path is not built yet", const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclAllGather, "the data path is not built yet", const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclAlltoAll, "the data path is not built yet", const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclGather, "the data path is not built yet", const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclScatter, "the data path is not built yet", const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclSend, "the data path is not built yet", const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclRecv, "the data path is not built yet", void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream)
WEFT_PENDING(ncclGroupStart, "groups are not built yet", void)
WEFT_PENDING(ncclGroupEnd, "groups are not built yet", void)
WEFT_PENDING(ncclGroupSimulateEnd, "the tuning model is not built yet", ncclSimInfo_t* simInfo)
