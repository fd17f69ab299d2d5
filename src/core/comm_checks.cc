#include "core/comm_checks.h"

#include "core/communicator.h"

namespace weft::core {

Status checkCommHandle(ncclComm* comm, const char* fn) {
  WEFT_CHECK_ARG(comm != nullptr, "%s: argument 'comm' is NULL", fn);
  WEFT_CHECK_ARG(comm->looksValid(), "%s: argument 'comm' (%p) is not a live communicator; was it destroyed?", fn,
                 (void*)comm);
  return ncclSuccess;
}

Status checkDataType(int type, const char* fn) {
  WEFT_CHECK_ARG(type >= 0 && type < ncclNumTypes, "%s: datatype %d is not a valid ncclDataType_t (0 to %d)", fn,
                 type, ncclNumTypes - 1);
  return ncclSuccess;
}

namespace {

// What no call but ncclCommDestroy and ncclCommAbort gets past, whatever else it accepts.
Status checkCreatedAndNotFinalized(ncclComm* comm, const char* fn) {
  if (comm->asyncError.load(std::memory_order_acquire) == ncclInProgress) {
    WEFT_WARN("%s: communicator (rank %d) is still being created; poll ncclCommGetAsyncError until it returns "
              "ncclSuccess before using it", fn, comm->rank);
    return ncclInvalidUsage;
  }
  if (comm->finalized) {
    WEFT_WARN("%s: communicator (rank %d) was finalized; only ncclCommDestroy may follow", fn, comm->rank);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

}  // namespace

Status checkCommUsable(ncclComm* comm, const char* fn) {
  WEFT_TRY(checkCommHandle(comm, fn));
  WEFT_TRY(checkCreatedAndNotFinalized(comm, fn));
  if (comm->revoked.load()) {
    WEFT_WARN("%s: communicator (rank %d of %d) was revoked (ncclCommRevoke); only ncclCommSplit, ncclCommShrink, "
              "ncclCommDestroy and ncclCommAbort may follow", fn, comm->rank, comm->nRanks);
    return ncclInvalidUsage;
  }
  const ncclResult_t state = comm->asyncError.load(std::memory_order_acquire);
  if (state != ncclSuccess) {
    WEFT_WARN("%s: communicator (rank %d of %d) has failed earlier (%s) and cannot be used; see the earlier warning "
              "(ncclGetLastError) and destroy or abort it", fn, comm->rank, comm->nRanks, ncclGetErrorString(state));
    return state;
  }
  if (comm->abortRequested.load(std::memory_order_relaxed)) {
    WEFT_WARN("%s: communicator (rank %d) was aborted", fn, comm->rank);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

// A revoked or (for ncclCommShrink) failed parent may still make children.
Status checkCommParent(ncclComm* comm, const char* fn, bool mayHaveFailed) {
  WEFT_TRY(checkCommHandle(comm, fn));
  if (!comm->revoked.load() && !mayHaveFailed) return checkCommUsable(comm, fn);
  return checkCreatedAndNotFinalized(comm, fn);
}

}  // namespace weft::core
