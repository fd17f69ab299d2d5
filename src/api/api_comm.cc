// Communicator entry points: creation, splitting, finalize/destroy/abort, queries, reduction ops.
#include <thread>

#include "api/export.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "core/comm_checks.h"
#include "core/comm_init.h"
#include "core/comm_shrink.h"
#include "core/comm_split.h"
#include "core/communicator.h"
#include "core/library.h"
#include "enqueue/group.h"
#include "enqueue/redop.h"
#include "runtime/gpu.h"

namespace weft::api {
namespace {

enum class JobKind { kCreation, kFinalization };

// Runs a communicator job that waits for the peers (creation, finalization): now; at the group's
// end when inside a group, beside the other communicators' jobs; and for a non-blocking
// communicator on its own thread, which reports through ncclCommGetAsyncError.
Status runCommJob(ncclComm* comm, std::function<Status()> job, JobKind kind) {
  auto defer = [comm, kind](std::function<Status()> j, bool blocking) {
    if (kind == JobKind::kCreation) enqueue::deferInit(std::move(j), blocking, comm);
    else enqueue::deferFinalize(std::move(j), blocking, comm);
  };
  if (!comm->config.blocking) {
    comm->asyncError.store(ncclInProgress);
    auto start = [comm, job]() -> Status {
      if (comm->initThread.joinable()) comm->initThread.join();
      comm->initThread = std::thread([comm, job] {
        // No exception may end the process from this thread; one that escapes the job fails it.
        const Status s = guard("a non-blocking communicator job", job);
        if (isError(s) && comm->asyncError.load() == ncclInProgress) comm->asyncError.store(s);
      });
      return ncclInProgress;
    };
    if (enqueue::inGroup()) {
      defer(start, /*blocking=*/false);
      return ncclSuccess;
    }
    return start();
  }
  if (enqueue::inGroup()) {
    defer(job, /*blocking=*/true);
    return ncclSuccess;
  }
  return job();
}

// Starts the creation of one communicator whose handle is already allocated.
Status startInit(ncclComm* comm, const std::vector<ncclUniqueId>& ids, int nRanks, int rank, int cudaDev) {
  comm->rank = rank;
  comm->nRanks = nRanks;
  comm->cudaDev = cudaDev;
  comm->asyncError.store(ncclInProgress);
  auto job = [comm, ids, nRanks, rank, cudaDev]() -> Status {
    return core::initCommunicator(comm, ids, nRanks, rank, cudaDev);
  };
  return runCommJob(comm, job, JobKind::kCreation);
}

void destroyNow(ncclComm* comm) {
  if (comm->initThread.joinable()) comm->initThread.join();
  core::freeCommunicator(comm);
  delete comm;
}

Status initRankConfig(ncclComm_t* newcomm, int nranks, const std::vector<ncclUniqueId>& ids, int rank,
                      const ncclConfig_t* config, const char* fn) {
  WEFT_CHECK_ARG(newcomm != nullptr, "%s: argument 'comm' (the output pointer) is NULL", fn);
  *newcomm = nullptr;
  WEFT_CHECK_ARG(nranks >= 1, "%s: nranks is %d; it must be at least 1", fn, nranks);
  WEFT_CHECK_ARG(rank >= 0 && rank < nranks, "%s: rank %d is out of range for nranks %d", fn, rank, nranks);
  for (size_t i = 0; i < ids.size(); ++i) {  // before any GPU query: a garbled id is the caller's error
    bootstrap::UniqueIdInfo info;
    std::string why;
    WEFT_CHECK_ARG(bootstrap::decodeUniqueId(ids[i], &info, &why),
                   "%s: unique id %zu of %zu was not made by ncclGetUniqueId (or not passed on whole): %s", fn, i + 1,
                   ids.size(), why.c_str());
  }
  core::initOnce();
  core::CommConfig cfg;
  WEFT_TRY(core::parseConfig(config, fn, &cfg));
  int dev = -1;
  WEFT_TRY(runtime::getDevice(&dev));
  auto* comm = new ncclComm();
  comm->config = cfg;
  Status s = startInit(comm, ids, nranks, rank, dev);
  if (isError(s)) {
    destroyNow(comm);
    return s;
  }
  *newcomm = comm;
  return s;
}

}  // namespace
}  // namespace weft::api

using namespace weft;
using namespace weft::api;

WEFT_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t* config) {
  return guardGroupCall("ncclCommInitRankConfig",
               [&] { return initRankConfig(comm, nranks, {commId}, rank, config, "ncclCommInitRankConfig"); });
}

WEFT_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return guardGroupCall("ncclCommInitRank",
                        [&] { return initRankConfig(comm, nranks, {commId}, rank, nullptr, "ncclCommInitRank"); });
}

WEFT_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config) {
  return guardGroupCall("ncclCommInitRankScalable", [&]() -> Status {
    WEFT_CHECK_ARG(nId >= 1, "ncclCommInitRankScalable: nId is %d; it must be at least 1", nId);
    WEFT_CHECK_ARG(commIds != nullptr, "ncclCommInitRankScalable: argument 'commIds' is NULL");
    WEFT_CHECK_ARG(nId <= nranks, "ncclCommInitRankScalable: nId (%d) is larger than nranks (%d)", nId, nranks);
    std::vector<ncclUniqueId> ids(commIds, commIds + nId);
    return initRankConfig(newcomm, nranks, ids, myrank, config, "ncclCommInitRankScalable");
  });
}

WEFT_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  return guard("ncclCommInitAll", [&]() -> Status {
    WEFT_CHECK_ARG(comms != nullptr, "ncclCommInitAll: argument 'comm' is NULL");
    WEFT_CHECK_ARG(ndev >= 1, "ncclCommInitAll: ndev is %d; it must be at least 1", ndev);
    int count = 0;
    WEFT_TRY(runtime::deviceCount(&count));
    for (int i = 0; i < ndev; ++i) {
      int d = devlist ? devlist[i] : i;
      WEFT_CHECK_ARG(d >= 0 && d < count, "ncclCommInitAll: device %d (entry %d) does not exist; %d devices visible", d,
                     i, count);
      for (int j = 0; j < i; ++j) {
        WEFT_CHECK_ARG(!devlist || devlist[j] != d, "ncclCommInitAll: device %d appears twice in devlist", d);
      }
    }
    ncclUniqueId id;
    WEFT_TRY(bootstrap::createUniqueId(&id));
    int saved = -1;
    WEFT_TRY(runtime::getDevice(&saved));
    // Inside the caller's group the creations run at the caller's ncclGroupEnd, which also
    // reports a failure to the handles: they must stay until then.
    const bool nested = enqueue::inGroup();
    WEFT_TRY(enqueue::groupStart());
    Status first = ncclSuccess;
    int tried = 0;  // comms[0, tried) hold a handle or NULL
    for (int i = 0; i < ndev && !isError(first); ++i) {
      comms[i] = nullptr;
      tried = i + 1;
      first = runtime::setDevice(devlist ? devlist[i] : i);
      if (!isError(first)) {  // caught here: the group level opened above must close whatever happens
        first = guard("ncclCommInitAll",
                      [&] { return initRankConfig(&comms[i], ndev, {id}, i, nullptr, "ncclCommInitAll"); });
      }
    }
    if (isError(first)) enqueue::failGroup(first);
    Status end = enqueue::groupEnd();
    (void)runtime::setDevice(saved);
    if (!nested && (isError(first) || isError(end))) {  // no handle of a failed call stays behind
      for (int i = 0; i < tried; ++i) {
        if (comms[i] != nullptr) destroyNow(comms[i]);
        comms[i] = nullptr;
      }
    }
    return isError(first) ? first : end;
  });
}

WEFT_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  return guard("ncclCommFinalize", [&]() -> Status {
    WEFT_TRY(core::checkCommUsable(comm, "ncclCommFinalize"));
    auto job = [comm]() -> Status {
      Status s = core::finalizeCommunicator(comm);
      comm->asyncError.store(s);
      return s;
    };
    return runCommJob(comm, job, JobKind::kFinalization);
  });
}

WEFT_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  return guard("ncclCommDestroy", [&]() -> Status {
    if (comm == nullptr) return ncclSuccess;
    WEFT_TRY(core::checkCommHandle(comm, "ncclCommDestroy"));
    if (enqueue::inGroup()) {  // at the group's end, after its launches and finalizations (as NCCL)
      enqueue::deferDestroy(comm, [comm] { destroyNow(comm); });
      return ncclSuccess;
    }
    destroyNow(comm);
    return ncclSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return guard("ncclCommAbort", [&]() -> Status {
    if (comm == nullptr) return ncclSuccess;
    WEFT_TRY(core::checkCommHandle(comm, "ncclCommAbort"));
    core::requestAbort(comm);
    if (enqueue::inGroup()) {
      enqueue::deferAbort(comm, [comm] { destroyNow(comm); });  // with the group's other aborts
      return ncclSuccess;
    }
    destroyNow(comm);
    return ncclSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  return guard("ncclCommGetAsyncError", [&]() -> Status {
    WEFT_TRY(core::checkCommHandle(comm, "ncclCommGetAsyncError"));
    WEFT_CHECK_ARG(asyncError != nullptr, "ncclCommGetAsyncError: argument 'asyncError' is NULL");
    *asyncError = comm->asyncError.load(std::memory_order_acquire);
    return ncclSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  return guard("ncclCommCount", [&]() -> Status {
    WEFT_CHECK_ARG(count != nullptr, "ncclCommCount: argument 'count' is NULL");
    WEFT_TRY(core::checkCommHandle(comm, "ncclCommCount"));
    *count = comm->nRanks;
    return ncclSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  return guard("ncclCommCuDevice", [&]() -> Status {
    WEFT_CHECK_ARG(device != nullptr, "ncclCommCuDevice: argument 'device' is NULL");
    WEFT_TRY(core::checkCommHandle(comm, "ncclCommCuDevice"));
    *device = comm->cudaDev;
    return ncclSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  return guard("ncclCommUserRank", [&]() -> Status {
    WEFT_CHECK_ARG(rank != nullptr, "ncclCommUserRank: argument 'rank' is NULL");
    WEFT_TRY(core::checkCommHandle(comm, "ncclCommUserRank"));
    *rank = comm->rank;
    return ncclSuccess;
  });
}

WEFT_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm) {
  return guard("ncclRedOpCreatePreMulSum", [&]() -> Status {
    WEFT_TRY(core::checkCommHandle(comm, "ncclRedOpCreatePreMulSum"));
    return enqueue::createPreMulSum(comm, op, scalar, enumArg(datatype), enumArg(residence));
  });
}

WEFT_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  return guard("ncclRedOpDestroy", [&]() -> Status {
    WEFT_TRY(core::checkCommHandle(comm, "ncclRedOpDestroy"));
    return enqueue::destroyRedOp(comm, enumArg(op));
  });
}

WEFT_API(ncclResult_t, ncclGroupStart) { return guard("ncclGroupStart", [] { return enqueue::groupStart(); }); }

WEFT_API(ncclResult_t, ncclGroupEnd) { return guard("ncclGroupEnd", [] { return enqueue::groupEnd(); }); }

WEFT_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return guard("ncclGroupSimulateEnd", [&]() -> Status {
    // As NCCL: without a simInfo this is ncclGroupEnd (the work is launched); simInfo is read only
    // where the outermost group ends. A bad one there still closes the group (else every later
    // call would only be queued) and fails it: nothing is estimated or launched.
    if (simInfo == nullptr) return enqueue::groupEnd();
    if (enqueue::groupDepth() != 1 || simInfo->magic == 0x74685283) return enqueue::groupSimulateEnd(simInfo);
    WEFT_WARN("ncclGroupSimulateEnd: simInfo was not initialized with NCCL_SIM_INFO_INITIALIZER (magic 0x%x)",
              simInfo->magic);
    enqueue::failGroup(ncclInvalidArgument);
    (void)enqueue::groupSimulateEnd(nullptr);
    return ncclInvalidArgument;
  });
}

WEFT_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return guardGroupCall("ncclCommSplit", [&]() -> Status {
    WEFT_TRY(core::checkCommParent(comm, "ncclCommSplit", /*mayHaveFailed=*/false));
    return core::splitCommunicator(comm, color, key, newcomm, config);
  });
}

WEFT_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return guardGroupCall("ncclCommShrink", [&]() -> Status {
    WEFT_TRY(core::checkCommParent(comm, "ncclCommShrink", /*mayHaveFailed=*/true));
    return core::shrinkCommunicator(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  });
}

// Local, as in NCCL: every rank that wants its work stopped calls it. Runs to the end here in
// non-blocking mode too (the kernels stop within microseconds of the flag).
WEFT_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  return guard("ncclCommRevoke", [&]() -> Status {
    WEFT_TRY(core::checkCommHandle(comm, "ncclCommRevoke"));
    WEFT_CHECK_ARG(revokeFlags == NCCL_REVOKE_DEFAULT, "ncclCommRevoke: revokeFlags is %d; it must be "
                   "NCCL_REVOKE_DEFAULT (0)", revokeFlags);
    WEFT_CHECK_ARG(!comm->revoked.load(), "ncclCommRevoke: communicator (rank %d) was revoked already", comm->rank);
    WEFT_CHECK_ARG(!comm->finalized, "ncclCommRevoke: communicator (rank %d) was finalized; only ncclCommDestroy may "
                   "follow", comm->rank);
    if (comm->asyncError.load() == ncclInProgress) {
      WEFT_WARN("ncclCommRevoke: communicator (rank %d) is still being created; poll ncclCommGetAsyncError until it "
                "is done, or abort it", comm->rank);
      return ncclInvalidUsage;
    }
    return core::revokeCommunicator(comm);
  });
}
