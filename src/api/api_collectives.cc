// Collective and point-to-point entry points: check the arguments, turn the call into tasks, queue.
#include <cstdint>

#include "api/export.h"
#include "core/buffer_checks.h"
#include "core/call_check.h"
#include "core/comm_checks.h"
#include "core/communicator.h"
#include "enqueue/group.h"
#include "enqueue/redop.h"

namespace weft::api {
namespace {

using enqueue::Task;
using enqueue::TaskKind;

// Validation shared by every call; fills the parts of the task common to all kinds. The datatype
// comes by reference: it is read as an integer (enumArg) until checked.
Status startTask(const char* fn, ncclComm_t comm, size_t count, const ncclDataType_t& datatype,
                 runtime::Stream stream, TaskKind kind, Task* t) {
  const int type = enumArg(datatype);
  WEFT_TRY(core::checkCommUsable(comm, fn));
  WEFT_TRY(core::checkDataType(type, fn));
  WEFT_CHECK_ARG(count <= (SIZE_MAX >> 4), "%s: count %zu is too large", fn, count);
  *t = Task{kind};
  t->count = count;
  t->dataType = (dev::DataType)type;
  t->stream = stream;
  t->opSeq = comm->nextOpSeq();
  return ncclSuccess;
}

Status checkRoot(const char* fn, ncclComm_t comm, int root) {
  WEFT_CHECK_ARG(root >= 0 && root < comm->nRanks, "%s: root %d is out of range; the communicator has %d ranks", fn,
                 root, comm->nRanks);
  return ncclSuccess;
}

Status checkBuffer(const char* fn, const char* name, const void* buf, size_t count) {
  WEFT_CHECK_ARG(count == 0 || buf != nullptr, "%s: %s is NULL but count is %zu", fn, name, count);
  return ncclSuccess;
}

// The memory a call touches on this rank: `blocks` runs of count elements from ptr (0: none).
struct Span {
  const void* ptr;
  size_t blocks;
};

// Where block k of count elements starts; equality tests only, so wrapping is harmless.
uintptr_t blockAt(const void* base, size_t k, const Task& t) {
  return (uintptr_t)base + k * t.count * (size_t)dev::dataTypeBytes(t.dataType);
}

// Sizes, overlap, pointers and stream of a call (core/buffer_checks.h).
Status checkMemory(const char* fn, ncclComm_t comm, const Task& t, Span send, Span recv, bool inPlace,
                   const char* inPlaceRule) {
  const size_t typeBytes = (size_t)dev::dataTypeBytes(t.dataType);
  core::CallBuffers buffers;
  buffers.send.ptr = send.ptr;
  buffers.recv.ptr = recv.ptr;
  if (send.blocks > 0) WEFT_TRY(core::spanBytes(fn, t.count, send.blocks, typeBytes, &buffers.send.bytes));
  if (recv.blocks > 0) WEFT_TRY(core::spanBytes(fn, t.count, recv.blocks, typeBytes, &buffers.recv.bytes));
  buffers.inPlace = inPlace;
  buffers.inPlaceRule = inPlaceRule;
  return core::checkCallBuffers(comm, fn, t.stream, buffers);
}

constexpr const char* kSameBuffer = "sendbuff == recvbuff";

// ncclBroadcast and ncclBcast (in place).
Status broadcast(const char* fn, const void* sendbuff, void* recvbuff, size_t count,
                 const ncclDataType_t& datatype, int root, ncclComm_t comm, runtime::Stream stream) {
  Task t;
  WEFT_TRY(startTask(fn, comm, count, datatype, stream, TaskKind::kBroadcast, &t));
  WEFT_TRY(checkRoot(fn, comm, root));
  if (comm->rank == root) WEFT_TRY(checkBuffer(fn, "sendbuff", sendbuff, count));
  WEFT_TRY(checkBuffer(fn, "recvbuff", recvbuff, count));
  const bool isRoot = comm->rank == root;
  WEFT_TRY(checkMemory(fn, comm, t, {sendbuff, isRoot ? 1u : 0u}, {recvbuff, 1}, sendbuff == recvbuff, kSameBuffer));
  t.root = root;
  t.sendBuff = comm->rank == root ? sendbuff : recvbuff;
  t.recvBuff = recvbuff;
  return enqueue::enqueueTask(comm, t);
}

}  // namespace
}  // namespace weft::api

using namespace weft;
using namespace weft::api;

WEFT_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclAllReduce", [&]() -> Status {
    Task t;
    WEFT_TRY(startTask("ncclAllReduce", comm, count, datatype, stream, TaskKind::kAllReduce, &t));
    WEFT_TRY(checkBuffer("ncclAllReduce", "sendbuff", sendbuff, count));
    WEFT_TRY(checkBuffer("ncclAllReduce", "recvbuff", recvbuff, count));
    WEFT_TRY(checkMemory("ncclAllReduce", comm, t, {sendbuff, 1}, {recvbuff, 1}, sendbuff == recvbuff, kSameBuffer));
    WEFT_TRY(enqueue::resolveRedOp(comm, enumArg(op), datatype, "ncclAllReduce", &t));
    t.sendBuff = sendbuff;
    t.recvBuff = recvbuff;
    return enqueue::enqueueTask(comm, t);
  });
}

WEFT_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclBroadcast", [&]() -> Status {
    return broadcast("ncclBroadcast", sendbuff, recvbuff, count, datatype, root, comm, stream);
  });
}

WEFT_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         runtime::Stream stream) {
  return guardGroupCall("ncclBcast", [&]() -> Status {
    return broadcast("ncclBcast", buff, buff, count, datatype, root, comm, stream);
  });
}

WEFT_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclReduce", [&]() -> Status {
    Task t;
    WEFT_TRY(startTask("ncclReduce", comm, count, datatype, stream, TaskKind::kReduce, &t));
    WEFT_TRY(checkRoot("ncclReduce", comm, root));
    WEFT_TRY(checkBuffer("ncclReduce", "sendbuff", sendbuff, count));
    if (comm->rank == root) WEFT_TRY(checkBuffer("ncclReduce", "recvbuff", recvbuff, count));
    WEFT_TRY(checkMemory("ncclReduce", comm, t, {sendbuff, 1}, {recvbuff, comm->rank == root ? 1u : 0u},
                         sendbuff == recvbuff, kSameBuffer));
    WEFT_TRY(enqueue::resolveRedOp(comm, enumArg(op), datatype, "ncclReduce", &t));
    t.root = root;
    t.sendBuff = sendbuff;
    t.recvBuff = recvbuff;
    return enqueue::enqueueTask(comm, t);
  });
}

WEFT_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclAllGather", [&]() -> Status {
    Task t;
    WEFT_TRY(startTask("ncclAllGather", comm, sendcount, datatype, stream, TaskKind::kAllGather, &t));
    WEFT_TRY(checkBuffer("ncclAllGather", "sendbuff", sendbuff, sendcount));
    WEFT_TRY(checkBuffer("ncclAllGather", "recvbuff", recvbuff, sendcount));
    WEFT_TRY(checkMemory("ncclAllGather", comm, t, {sendbuff, 1}, {recvbuff, (size_t)comm->nRanks},
                         (uintptr_t)sendbuff == blockAt(recvbuff, comm->rank, t),
                         "sendbuff == recvbuff + rank * sendcount elements"));
    t.sendBuff = sendbuff;
    t.recvBuff = recvbuff;
    return enqueue::enqueueTask(comm, t);
  });
}

WEFT_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclReduceScatter", [&]() -> Status {
    Task t;
    WEFT_TRY(startTask("ncclReduceScatter", comm, recvcount, datatype, stream, TaskKind::kReduceScatter, &t));
    WEFT_TRY(checkBuffer("ncclReduceScatter", "sendbuff", sendbuff, recvcount));
    WEFT_TRY(checkBuffer("ncclReduceScatter", "recvbuff", recvbuff, recvcount));
    WEFT_TRY(checkMemory("ncclReduceScatter", comm, t, {sendbuff, (size_t)comm->nRanks}, {recvbuff, 1},
                         (uintptr_t)recvbuff == blockAt(sendbuff, comm->rank, t),
                         "recvbuff == sendbuff + rank * recvcount elements"));
    WEFT_TRY(enqueue::resolveRedOp(comm, enumArg(op), datatype, "ncclReduceScatter", &t));
    t.sendBuff = sendbuff;
    t.recvBuff = recvbuff;
    return enqueue::enqueueTask(comm, t);
  });
}

WEFT_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclSend", [&]() -> Status {
    Task t;
    WEFT_TRY(startTask("ncclSend", comm, count, datatype, stream, TaskKind::kSend, &t));
    WEFT_CHECK_ARG(peer >= 0 && peer < comm->nRanks, "ncclSend: peer %d is out of range; the communicator has %d ranks",
                   peer, comm->nRanks);
    WEFT_TRY(checkBuffer("ncclSend", "sendbuff", sendbuff, count));
    WEFT_TRY(checkMemory("ncclSend", comm, t, {sendbuff, 1}, {nullptr, 0}, false, nullptr));
    t.peer = peer;
    t.sendBuff = sendbuff;
    return enqueue::enqueueTask(comm, t);
  });
}

WEFT_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         runtime::Stream stream) {
  return guardGroupCall("ncclRecv", [&]() -> Status {
    Task t;
    WEFT_TRY(startTask("ncclRecv", comm, count, datatype, stream, TaskKind::kRecv, &t));
    WEFT_CHECK_ARG(peer >= 0 && peer < comm->nRanks, "ncclRecv: peer %d is out of range; the communicator has %d ranks",
                   peer, comm->nRanks);
    WEFT_TRY(checkBuffer("ncclRecv", "recvbuff", recvbuff, count));
    WEFT_TRY(checkMemory("ncclRecv", comm, t, {nullptr, 0}, {recvbuff, 1}, false, nullptr));
    t.peer = peer;
    t.recvBuff = recvbuff;
    return enqueue::enqueueTask(comm, t);
  });
}

// AlltoAll, Gather and Scatter are groups of sends and receives.
namespace {

Status queueExchange(ncclComm_t comm, Task t, TaskKind kind, int peer, const void* send, void* recv) {
  t.kind = kind;
  t.peer = peer;
  t.sendBuff = send;
  t.recvBuff = recv;
  return enqueue::enqueueTask(comm, t);
}

// Published as one collective (core/call_check.h), queued as one group of sends and receives.
template <typename Body>
Status sendReceiveCollective(ncclComm_t comm, core::CollCall call, const Task& t, Body&& body) {
  core::CallSignature signature;
  signature.call = call;
  signature.dataType = (uint8_t)t.dataType;
  signature.redOp = core::kNoRedOp;
  signature.root = call == core::kCallAlltoAll ? -1 : t.root;
  signature.count = t.count;
  WEFT_TRY(enqueue::groupStart());
  enqueue::joinGroup(comm);  // a failed group takes the call back out of the ledger too
  Status s = core::noteCollectiveCall(comm, signature);
  if (!isError(s)) s = body();
  if (isError(s)) enqueue::failGroup(s);
  Status end = enqueue::groupEnd();
  return isError(s) ? s : end;
}

}  // namespace

WEFT_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclAlltoAll", [&]() -> Status {
    Task t;
    WEFT_TRY(startTask("ncclAlltoAll", comm, count, datatype, stream, TaskKind::kSend, &t));
    WEFT_TRY(checkBuffer("ncclAlltoAll", "sendbuff", sendbuff, count));
    WEFT_TRY(checkBuffer("ncclAlltoAll", "recvbuff", recvbuff, count));
    WEFT_CHECK_ARG(count == 0 || comm->nRanks == 1 || sendbuff != recvbuff,
                   "ncclAlltoAll: in-place operation (sendbuff == recvbuff) is not supported; use separate buffers");
    const size_t ranks = (size_t)comm->nRanks;
    const bool oneRankInPlace = comm->nRanks == 1 && sendbuff == recvbuff;  // a copy onto itself: allowed
    WEFT_TRY(checkMemory("ncclAlltoAll", comm, t, {sendbuff, ranks}, {recvbuff, ranks}, oneRankInPlace, nullptr));
    size_t block = count * (size_t)dev::dataTypeBytes(t.dataType);
    return sendReceiveCollective(comm, core::kCallAlltoAll, t, [&]() -> Status {
      for (int p = 0; p < comm->nRanks; ++p) {
        WEFT_TRY(queueExchange(comm, t, TaskKind::kSend, p, (const char*)sendbuff + p * block, nullptr));
        WEFT_TRY(queueExchange(comm, t, TaskKind::kRecv, p, nullptr, (char*)recvbuff + p * block));
      }
      return ncclSuccess;
    });
  });
}

WEFT_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclGather", [&]() -> Status {
    Task t;
    WEFT_TRY(startTask("ncclGather", comm, count, datatype, stream, TaskKind::kSend, &t));
    WEFT_TRY(checkRoot("ncclGather", comm, root));
    WEFT_TRY(checkBuffer("ncclGather", "sendbuff", sendbuff, count));
    if (comm->rank == root) WEFT_TRY(checkBuffer("ncclGather", "recvbuff", recvbuff, count));
    const bool isRoot = comm->rank == root;
    WEFT_TRY(checkMemory("ncclGather", comm, t, {sendbuff, 1}, {recvbuff, isRoot ? (size_t)comm->nRanks : 0},
                         isRoot && (uintptr_t)sendbuff == blockAt(recvbuff, root, t),
                         "sendbuff == recvbuff + root * count elements"));
    t.root = root;
    size_t block = count * (size_t)dev::dataTypeBytes(t.dataType);
    return sendReceiveCollective(comm, core::kCallGather, t, [&]() -> Status {
      // In place: the root's own block is already where it belongs.
      bool inPlaceRoot = comm->rank == root && (const char*)recvbuff + root * block == sendbuff;
      if (comm->rank == root) {
        for (int p = 0; p < comm->nRanks; ++p) {
          if (p == root && inPlaceRoot) continue;
          WEFT_TRY(queueExchange(comm, t, TaskKind::kRecv, p, nullptr, (char*)recvbuff + p * block));
        }
      }
      if (inPlaceRoot) return ncclSuccess;
      return queueExchange(comm, t, TaskKind::kSend, root, sendbuff, nullptr);
    });
  });
}

WEFT_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, runtime::Stream stream) {
  return guardGroupCall("ncclScatter", [&]() -> Status {
    Task t;
    WEFT_TRY(startTask("ncclScatter", comm, count, datatype, stream, TaskKind::kSend, &t));
    WEFT_TRY(checkRoot("ncclScatter", comm, root));
    WEFT_TRY(checkBuffer("ncclScatter", "recvbuff", recvbuff, count));
    if (comm->rank == root) WEFT_TRY(checkBuffer("ncclScatter", "sendbuff", sendbuff, count));
    const bool isRoot = comm->rank == root;
    WEFT_TRY(checkMemory("ncclScatter", comm, t, {sendbuff, isRoot ? (size_t)comm->nRanks : 0}, {recvbuff, 1},
                         isRoot && (uintptr_t)recvbuff == blockAt(sendbuff, root, t),
                         "recvbuff == sendbuff + root * count elements"));
    t.root = root;
    size_t block = count * (size_t)dev::dataTypeBytes(t.dataType);
    return sendReceiveCollective(comm, core::kCallScatter, t, [&]() -> Status {
      bool inPlaceRoot = comm->rank == root && (const char*)sendbuff + root * block == recvbuff;
      if (comm->rank == root) {
        for (int p = 0; p < comm->nRanks; ++p) {
          if (p == root && inPlaceRoot) continue;
          WEFT_TRY(queueExchange(comm, t, TaskKind::kSend, p, (const char*)sendbuff + p * block, nullptr));
        }
      }
      if (inPlaceRoot) return ncclSuccess;
      return queueExchange(comm, t, TaskKind::kRecv, root, nullptr, recvbuff);
    });
  });
}
