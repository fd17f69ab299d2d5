#include "enqueue/launch.h"

#include <sched.h>

#include <chrono>

#include "core/communicator.h"
#include "core/param.h"
#include "device/kernel_api.h"
#include "enqueue/planner.h"
#include "runtime/gpu.h"

namespace weft::enqueue {
namespace {

const param::IntParam kWaitTimeout{"NCCL_TIMEOUT", 1800};  // seconds; 0 = wait forever

PlanShape shapeOf(const ncclComm* comm) {
  PlanShape s;
  s.rank = comm->rank;
  s.nRanks = comm->nRanks;
  s.nChannels = comm->nChannels;
  s.stepBytes = comm->stepBytes;
  s.sendChannels.resize(comm->nRanks);
  s.recvChannels.resize(comm->nRanks);
  for (int p = 0; p < comm->nRanks; ++p) {
    s.sendChannels[p] = comm->connPlan.sendChannels(p);
    s.recvChannels[p] = comm->connPlan.recvChannels(p);
  }
  return s;
}

// Waits until the kernels have freed n FIFO slots, giving up on abort or after the deadline.
Status reserveFifo(ncclComm* comm, uint32_t n, uint32_t* first) {
  if (n > comm->fifo.capacity()) {
    WEFT_WARN("rank %d: one launch needs %u work slots but the work FIFO has %u", comm->rank, n,
              comm->fifo.capacity());
    return ncclInternalError;
  }
  auto start = std::chrono::steady_clock::now();
  const int64_t timeout = kWaitTimeout.get();
  for (uint64_t spins = 0;; ++spins) {
    comm->fifo.observeConsumed(*comm->fifoConsumed);
    if (comm->fifo.reserve(n, first)) return ncclSuccess;
    if (comm->abortRequested.load(std::memory_order_relaxed)) return ncclInvalidUsage;
    if ((spins & 1023) == 0) {
      ncclResult_t async = comm->asyncError.load();
      if (isError(async)) return async;
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (timeout > 0 && waited > (double)timeout) {
        WEFT_WARN("rank %d: waited %.0f s for earlier kernels to finish (operation #%llu); a peer rank is probably "
                  "stuck or dead. Set NCCL_TIMEOUT (seconds) to change this limit", comm->rank, waited,
                  (unsigned long long)comm->opCount());
        return ncclSystemError;
      }
    }
    sched_yield();
  }
}

// Writes one launch's items and returns its kernel arguments. Graph captures get a buffer of
// their own (the FIFO slots would be reused before the graph replays).
Status writeWorks(ncclComm* comm, const PlannedLaunch& launch, bool capturing, dev::DevKernelArgs* args) {
  uint32_t total = (uint32_t)launch.workCount();
  *args = dev::DevKernelArgs{};
  args->comm = comm->devComm;
  args->nBlocks = (uint32_t)launch.channels.size();
  args->blockArrivals = comm->blockArrivals;
  dev::DevWork* dst = nullptr;
  uint32_t first = 0;
  if (capturing) {
    void* host = nullptr;
    void* devView = nullptr;
    runtime::RelaxedCaptureMode relaxed;  // an allocation is not allowed in a strict capture
    WEFT_TRY(runtime::hostAllocMapped(&host, sizeof(dev::DevWork) * total));
    comm->graphWorkBuffers.push_back(host);
    WEFT_TRY(runtime::hostDevicePointer(host, &devView));
    dst = (dev::DevWork*)host;
    args->works = (const dev::DevWork*)devView;
    args->worksMask = ~0u;
    args->fifoConsumed = nullptr;
  } else {
    WEFT_TRY(reserveFifo(comm, total, &first));
    dst = comm->fifoHost;
    args->works = comm->fifoDev;
    args->worksMask = comm->fifo.mask();
    args->fifoConsumed = comm->fifoConsumedDev;
    args->fifoConsumedValue = first + total;
  }
  uint32_t pos = first;
  for (size_t b = 0; b < launch.channels.size(); ++b) {
    args->blocks[b].first = pos;
    args->blocks[b].count = (uint16_t)launch.works[b].size();
    args->blocks[b].channel = (uint8_t)launch.channels[b];
    for (const dev::DevWork& w : launch.works[b]) {
      uint32_t index = capturing ? pos : comm->fifo.slot(pos);
      dst[index] = w;
      ++pos;
    }
  }
  return ncclSuccess;
}

// The streams of the group's tasks: the first runs the kernels, the others join it by events.
void collectStreams(const std::vector<Task>& tasks, std::vector<cudaStream_t>* streams) {
  for (const Task& t : tasks) {
    bool seen = false;
    for (cudaStream_t s : *streams) seen = seen || s == t.stream;
    if (!seen) streams->push_back(t.stream);
  }
}

}  // namespace

Status launchQueued(ncclComm* comm) {
  if (comm->tasks.empty()) return ncclSuccess;
  std::vector<Task> tasks;
  tasks.swap(comm->tasks);
  std::vector<PlannedLaunch> launches;
  WEFT_TRY(planTasks(tasks, shapeOf(comm), &launches));
  if (launches.empty()) return ncclSuccess;

  runtime::ScopedDevice device;
  WEFT_TRY(device.set(comm->cudaDev));
  std::vector<cudaStream_t> streams;
  collectStreams(tasks, &streams);
  cudaStream_t stream = streams[0];
  runtime::CaptureInfo capture;
  WEFT_TRY(runtime::streamCaptureInfo(stream, &capture));
  bool capturing = capture.status == runtime::CaptureStatus::kActive;

  // Kernels of one communicator must not overlap: they share connections and step counters.
  // (A captured graph is ordered by its own edges; waiting on an event from outside is not allowed.)
  if (!capturing && comm->haveLaunched && comm->lastLaunchStream != stream) {
    WEFT_TRY(runtime::streamWaitEvent(stream, comm->lastLaunchEvent));
  }
  for (size_t i = 1; i < streams.size(); ++i) {
    WEFT_TRY(runtime::eventRecord(comm->joinEvent, streams[i]));
    WEFT_TRY(runtime::streamWaitEvent(stream, comm->joinEvent));
  }

  for (const PlannedLaunch& launch : launches) {
    dev::DevKernelArgs args;
    WEFT_TRY(writeWorks(comm, launch, capturing, &args));
    void* params[] = {&args};
    // One launch carries one protocol (the planner's rule); its items say which.
    dev::Proto proto = dev::kProtoSimple;
    for (const auto& list : launch.works)
      if (!list.empty()) {
        proto = (dev::Proto)list.front().proto;
        break;
      }
    WEFT_TRY(runtime::launchKernel(dev::kernelFunction(proto), runtime::Dim3(args.nBlocks),
                                   runtime::Dim3(dev::kernelThreads(proto)), params, dev::kernelDynamicSmem(proto),
                                   stream));
  }
  cudaEvent_t done = capturing ? comm->joinEvent : comm->lastLaunchEvent;
  WEFT_TRY(runtime::eventRecord(done, stream));
  for (size_t i = 1; i < streams.size(); ++i) WEFT_TRY(runtime::streamWaitEvent(streams[i], done));
  if (!capturing) {
    comm->lastLaunchStream = stream;
    comm->haveLaunched = true;
  }
  WEFT_TRACE(log::kColl, "rank %d: launched %zu kernel(s) for %zu task(s)%s", comm->rank, launches.size(),
             tasks.size(), capturing ? " into a CUDA graph" : "");
  return ncclSuccess;
}

float estimateQueuedMicroseconds(ncclComm* comm) {
  // Until the tuning model exists: a fixed launch cost plus bytes at a nominal NVLink rate.
  float us = 0.0f;
  for (const Task& t : comm->tasks) us += 10.0f + (float)t.bytes() / 300e3f;
  return us;
}

}  // namespace weft::enqueue
