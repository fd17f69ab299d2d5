// A task is one API call waiting in a communicator's queue until its group ends.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/abi.h"
#include "nccl.h"
#include "runtime/gpu.h"

namespace weft::enqueue {

// What the user asked for; the planner turns these into device work.
enum class TaskKind : uint8_t {
  kBroadcast, kReduce, kAllGather, kReduceScatter, kAllReduce, kSend, kRecv
};

const char* taskKindName(TaskKind kind);

// One queued call. AlltoAll, Gather and Scatter are queued as their sends and receives.
struct Task {
  TaskKind kind;
  const void* sendBuff = nullptr;
  void* recvBuff = nullptr;
  size_t count = 0;           // elements; per-rank block for AllGather/ReduceScatter
  dev::DataType dataType = dev::kUint8;
  dev::RedOp redOp = dev::kRedSum;
  uint64_t redOpArg = 0;      // see DevWork::redOpArg
  uint8_t callRedOp = 0xff;   // the caller's op, as every rank must pass it (core::CallSignature::redOp)
  bool scalarOnDevice = false;
  int root = 0;               // Broadcast/Reduce
  int peer = -1;              // Send/Recv
  runtime::Stream stream = nullptr;
  uint64_t opSeq = 0;         // the communicator's call number, for error messages
  // Both buffers lie in symmetric windows mapped flat on every rank (core/symmetric.h): team rank
  // 0's copies of them, and the distance between two ranks' copies in 4 GiB units. 0: they do not.
  uint32_t symStride4G = 0;
  const void* symSend0 = nullptr;
  void* symRecv0 = nullptr;

  size_t bytes() const { return count * (size_t)dev::dataTypeBytes(dataType); }
  bool isP2p() const { return kind == TaskKind::kSend || kind == TaskKind::kRecv; }
};

}  // namespace weft::enqueue
