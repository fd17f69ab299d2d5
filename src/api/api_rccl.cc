// RCCL's own entry points (ROCm's rccl.h), built into librccl.so only (CMake leaves this file out
// of the CUDA build so that libnccl.so exports exactly NCCL's names). The all-to-all variants are
// groups of the public send/receive calls; the rest answer ncclInvalidUsage with a reason that
// ncclGetLastError returns (README, "HIP / ROCm").
#include <cstdint>

#include "api/export.h"
#include "core/comm_checks.h"
#include "core/communicator.h"
#include "device/abi.h"
#include "enqueue/group.h"

namespace weft::api {
namespace {

// The per-peer arrays of an all-to-all-v, checked before anything is queued. Counts and
// displacements are in elements, as in RCCL; in-place exchanges are not supported.
Status checkAllToAllv(const char* fn, ncclComm_t comm, const void* sendbuff, const size_t sendcounts[],
                      const size_t sdispls[], const void* recvbuff, const size_t recvcounts[],
                      const size_t rdispls[], int type) {
  WEFT_TRY(core::checkCommUsable(comm, fn));
  WEFT_TRY(core::checkDataType(type, fn));
  WEFT_CHECK_ARG(sendcounts != nullptr && sdispls != nullptr && recvcounts != nullptr && rdispls != nullptr,
                 "%s: sendcounts, sdispls, recvcounts and rdispls must all be arrays of nRanks (%d) elements", fn,
                 comm->nRanks);
  const size_t maxElems = SIZE_MAX >> 4;
  bool anySend = false, anyRecv = false;
  for (int p = 0; p < comm->nRanks; ++p) {
    WEFT_CHECK_ARG(sendcounts[p] <= maxElems && sdispls[p] <= maxElems - sendcounts[p],
                   "%s: sendcounts[%d] = %zu with sdispls[%d] = %zu is too large", fn, p, sendcounts[p], p,
                   sdispls[p]);
    WEFT_CHECK_ARG(recvcounts[p] <= maxElems && rdispls[p] <= maxElems - recvcounts[p],
                   "%s: recvcounts[%d] = %zu with rdispls[%d] = %zu is too large", fn, p, recvcounts[p], p,
                   rdispls[p]);
    anySend |= sendcounts[p] != 0;
    anyRecv |= recvcounts[p] != 0;
  }
  WEFT_CHECK_ARG(!anySend || sendbuff != nullptr, "%s: sendbuff is NULL but a send count is not 0", fn);
  WEFT_CHECK_ARG(!anyRecv || recvbuff != nullptr, "%s: recvbuff is NULL but a receive count is not 0", fn);
  WEFT_CHECK_ARG(!(anySend && anyRecv) || sendbuff != recvbuff,
                 "%s: in-place operation (sendbuff == recvbuff) is not supported; use separate buffers", fn);
  return ncclSuccess;
}

// One send and one receive per peer with a non-zero count, in one group (nested in the caller's).
// `rawType` is the datatype argument as an integer (enumArg).
Status allToAllv(const char* fn, const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                 void* recvbuff, const size_t recvcounts[], const size_t rdispls[], int rawType, ncclComm_t comm,
                 runtime::Stream stream) {
  WEFT_TRY(checkAllToAllv(fn, comm, sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, rawType));
  const ncclDataType_t type = (ncclDataType_t)rawType;
  const size_t elem = (size_t)dev::dataTypeBytes((dev::DataType)type);
  WEFT_TRY(enqueue::groupStart());
  Status s = ncclSuccess;
  for (int p = 0; p < comm->nRanks && !isError(s); ++p) {
    if (sendcounts[p] != 0)
      s = pncclSend(static_cast<const char*>(sendbuff) + sdispls[p] * elem, sendcounts[p], type, p, comm, stream);
    if (!isError(s) && recvcounts[p] != 0)
      s = pncclRecv(static_cast<char*>(recvbuff) + rdispls[p] * elem, recvcounts[p], type, p, comm, stream);
  }
  if (isError(s)) enqueue::failGroup(s);
  Status end = enqueue::groupEnd();
  return isError(s) ? s : end;
}

constexpr const char* kNoMscclWhy = "weft has no MSCCL algorithm interpreter";

}  // namespace
}  // namespace weft::api

using namespace weft;
using namespace weft::api;

WEFT_API(ncclResult_t, ncclAllToAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, runtime::Stream stream) {
  // Passed on only once valid: handing an invalid enum value on would load it (enumArg).
  const ncclResult_t typeOk =
      guard("ncclAllToAll", [&] { return core::checkDataType(enumArg(datatype), "ncclAllToAll"); });
  if (isError(typeOk)) {
    enqueue::failGroup(typeOk);
    return typeOk;
  }
  return pncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}

WEFT_API(ncclResult_t, ncclAllToAllv, const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
         void* recvbuff, const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
         ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclAllToAllv", [&]() -> Status {
    return allToAllv("ncclAllToAllv", sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
                     enumArg(datatype), comm, stream);
  });
}

WEFT_API(ncclResult_t, ncclAlltoAllv, const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
         void* recvbuff, const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
         ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclAlltoAllv", [&]() -> Status {
    return allToAllv("ncclAlltoAllv", sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
                     enumArg(datatype), comm, stream);
  });
}

WEFT_API(ncclResult_t, ncclAllReduceWithBias, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, runtime::Stream stream, const void* acc) {
  return notImplemented("ncclAllReduceWithBias", "the bias-accumulating allreduce kernel is not written");
}

WEFT_API(ncclResult_t, mscclLoadAlgo, const char* mscclAlgoFilePath, mscclAlgoHandle_t* mscclAlgoHandle, int rank) {
  return notImplemented("mscclLoadAlgo", kNoMscclWhy);
}

WEFT_API(ncclResult_t, mscclRunAlgo, const void* sendBuff, const size_t sendCounts[], const size_t sDisPls[],
         void* recvBuff, const size_t recvCounts[], const size_t rDisPls[], size_t count, ncclDataType_t dataType,
         int root, int peer, ncclRedOp_t op, mscclAlgoHandle_t mscclAlgoHandle, ncclComm_t comm,
         runtime::Stream stream) {
  return notImplemented("mscclRunAlgo", kNoMscclWhy);
}

WEFT_API(ncclResult_t, mscclUnloadAlgo, mscclAlgoHandle_t mscclAlgoHandle) {
  return notImplemented("mscclUnloadAlgo", kNoMscclWhy);
}
