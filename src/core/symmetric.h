// The symmetric collectives' host half. Calls whose buffers lie in symmetric windows
// (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC) mapped flat on every rank of the
// communicator may run AllReduce, AllGather and ReduceScatter as kAlgoDirect on Simple: kernels
// that load and store the peers' buffers themselves (device/coll/run_symmetric.cuh), no
// connection buffers between. They need barrier memory every rank reaches: one small window of
// library memory, made with the communicator's first such window (a collective call on every
// rank) and kept until the communicator goes.
//
// As with NCCL, the user promises that every rank passes buffers at the same offsets of its
// windows; a call where some rank's buffers are not in such windows while others' are would wait
// in the barriers until the watchdog names the ranks (NCCL would wait too).
// NCCL_WEFT_SYMMETRIC=0 plans every call with the ordinary algorithms (all ranks must agree).
#pragma once

#include <vector>

#include "core/status.h"
#include "enqueue/task.h"

struct ncclComm;

namespace weft::core {

// After a window was mapped flat on every rank (collective, every rank calls it with the same
// `symmetricWindow`, its NCCL_WIN_COLL_SYMMETRIC flag): makes the barrier memory once. A failure
// on any rank leaves symmetric collectives off on all of them (INFO), never an error.
void enableSymmetric(ncclComm* comm, bool symmetricWindow);

// Marks the tasks whose buffers lie in symmetric windows (Task::symStride4G and the flat
// addresses), for the planner. Cheap when the communicator has no barrier memory.
void markSymmetricTasks(ncclComm* comm, std::vector<enqueue::Task>* tasks);

// Pure: how many bytes of a collective's send and receive buffers one rank touches (count is
// per rank block for AllGather/ReduceScatter); false for kinds without symmetric kernels.
bool symmetricSpans(enqueue::TaskKind kind, size_t count, int typeBytes, int nRanks, size_t* sendBytes,
                    size_t* recvBytes);

}  // namespace weft::core
