// Entry points whose features are not built yet. Each still exists (clients resolve every name at
// load time) and answers ncclInvalidUsage with a last-error text naming itself. The README lists
// them; move a name out of here when its feature lands.
#include "api/export.h"
#include "core/library.h"
#include "core/status.h"

using weft::api::notImplemented;

#define WEFT_PENDING(name, why, ...) \
  WEFT_API(ncclResult_t, name, __VA_ARGS__) { return notImplemented(#name, why); }

// The stubs below already give the answers that stay right once the feature lands: NULL handles
// and outputs are argument errors, destroying or aborting NULL is a no-op (as in NCCL), and the
// creation calls start the library up (version banner) before refusing.
namespace {
constexpr const char* kNoComms = "communicators are not built yet";

ncclResult_t pendingQuery(const char* function, ncclComm_t comm, const void* out, const char* outName) {
  WEFT_CHECK_ARG(comm != nullptr, "%s: argument 'comm' is NULL", function);
  WEFT_CHECK_ARG(out != nullptr, "%s: argument '%s' is NULL", function, outName);
  return notImplemented(function, kNoComms);
}

ncclResult_t pendingInit(const char* function, const ncclComm_t* comm) {
  weft::core::initOnce();
  WEFT_CHECK_ARG(comm != nullptr, "%s: argument 'comm' is NULL", function);
  return notImplemented(function, kNoComms);
}
}  // namespace

WEFT_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  return pendingInit("ncclCommInitRankConfig", comm);
}
WEFT_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return pendingInit("ncclCommInitRank", comm);
}
WEFT_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comm, int ndev, const int* devlist) {
  return pendingInit("ncclCommInitAll", comm);
}
WEFT_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  return pendingInit("ncclCommInitRankScalable", newcomm);
}
WEFT_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  return comm == nullptr ? ncclSuccess : notImplemented("ncclCommDestroy", kNoComms);
}
WEFT_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return comm == nullptr ? ncclSuccess : notImplemented("ncclCommAbort", kNoComms);
}
WEFT_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  return pendingQuery("ncclCommGetAsyncError", comm, asyncError, "asyncError");
}
WEFT_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  return pendingQuery("ncclCommCount", comm, count, "count");
}
WEFT_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  return pendingQuery("ncclCommCuDevice", comm, device, "device");
}
WEFT_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  return pendingQuery("ncclCommUserRank", comm, rank, "rank");
}

WEFT_PENDING(ncclMemAlloc, "needs the GPU runtime layer", void** ptr, size_t size)
WEFT_PENDING(ncclMemFree, "needs the GPU runtime layer", void* ptr)
WEFT_PENDING(ncclCommFinalize, "communicators are not built yet", ncclComm_t comm)
WEFT_PENDING(ncclCommRevoke, "communicator revocation", ncclComm_t comm, int revokeFlags)
WEFT_PENDING(ncclCommSplit, "communicators are not built yet", ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config)
WEFT_PENDING(ncclCommShrink, "communicator shrinking", ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags)
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
