#include "enqueue/launch.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#include "core/call_check.h"
#include "core/communicator.h"
#include "core/param.h"
#include "core/registrations.h"
#include "core/symmetric.h"
#include "core/watchdog.h"
#include "device/kernel_api.h"
#include "enqueue/planner.h"
#include "runtime/block_pool.h"
#include "runtime/gpu.h"
#include "transport/p2p/p2p_connections.h"
#include "transport/p2p/reg_sharing.h"

namespace weft::enqueue {
namespace {

// Blocks for send/receive to self beside the channels (planner.h defaultCopyLanes); 0: the default.
const param::IntParam kCopyLanes{"NCCL_WEFT_COPY_LANES", 0};
// 0: every launch runs its protocol's general kernel, also where a specialized one exists (A/B runs).
const param::IntParam kSpecialKernels{"NCCL_WEFT_SPECIAL_KERNELS", 1};
// Ring-sum launches of items up to this many bytes per channel run the inlined twin kernel
// (planner.h: kInlineSumChannelBytes); 0: never (A/B runs).
const param::IntParam kInlineSumBytes{"NCCL_WEFT_INLINE_SUM_BYTES", (int64_t)kInlineSumChannelBytes};
// 1 (default): kernels are launched with programmatic dependence on the stream's previous kernel
// (sm_90: programmatic dependent launch), so a launch's set-up overlaps the end of the kernel
// before it (arch::waitPreviousGrid). 2xH200, CUDA graph, all_reduce 64 B-32 KiB: 5.3-6.2 ->
// 4.8-5.6 us; 256 KiB-16 MiB busbw +3-12 % (session 7). 0: plain launches. 1 leaves it off where
// ranks share a GPU (see launchKernel); 2 uses it there too (A/B runs only: it can hang there).
const param::IntParam kOverlapLaunches{"NCCL_WEFT_PDL", 1};
// For measurements and tests: launches of at most this many items (default and most:
// kMaxInlineWorks) carry them inline; 0 sends every launch through the FIFO.
const param::IntParam kInlineWorks{"NCCL_WEFT_INLINE_WORKS", dev::kMaxInlineWorks};
// 0: registered sends never ask for the receiver's buffer (zero-copy off on this rank's sending
// side). Ranks may differ: a receiver always offers and judges by the sender's marker.
const param::IntParam kDirectSends{"NCCL_WEFT_P2P_DIRECT", 1};
// Items per graph work buffer (4096: 384 KiB); small values make tests hand buffers out again often.
const param::IntParam kGraphWorkItems{"NCCL_WEFT_GRAPH_WORK_ITEMS", 4096};
// 0: graph work buffers are never handed out again (grow-only, as before session 36; A/B runs).
const param::IntParam kGraphWorkReuse{"NCCL_WEFT_GRAPH_WORK_REUSE", 1};
// 0: captured launches leave no replay stamps (dev::DevKernelArgs::replayStamps), so the watchdog
// does not see graph replays (for measuring what the two stores per block cost).
const param::IntParam kReplayStamps{"NCCL_WEFT_REPLAY_STAMPS", 1};
// 1: every communicator sums the host time of its enqueue path per phase and reports it when freed
// (reportHostProfile): where a stream launch's host time goes. Off: one branch per phase.
const param::IntParam kHostProfile{"NCCL_WEFT_HOST_PROFILE", 0};

using Clock = std::chrono::steady_clock;
bool profiling() {
  static const bool on = dev::kDiagnosticHooks && kHostProfile.get() != 0;  // read once: launches are hot
  return on;
}
// Adds the time since *start to *sumUs and restarts *start (profiling only).
void lap(Clock::time_point* start, double* sumUs) {
  const Clock::time_point now = Clock::now();
  *sumUs += std::chrono::duration<double, std::micro>(now - *start).count();
  *start = now;
}

PlanShape makeShape(ncclComm* comm) {
  PlanShape s;
  s.rank = comm->rank;
  s.nRanks = comm->nRanks;
  s.nChannels = comm->nChannels;
  s.stepBytes = comm->stepBytes;
  s.copyLanes = kCopyLanes.get() > 0 ? (int)std::min<int64_t>(kCopyLanes.get(), dev::kMaxChannels - comm->nChannels)
                                     : defaultCopyLanes(comm->nChannels);
  s.tuning = comm->tuning;
  s.constants = &comm->tuningConstants;
  s.minCollChannels = comm->minCollChannels;
  s.sendChannels.resize(comm->nRanks);
  s.recvChannels.resize(comm->nRanks);
  for (int p = 0; p < comm->nRanks; ++p) {
    s.sendChannels[p] = comm->connPlan.sendChannels(p);
    s.recvChannels[p] = comm->connPlan.recvChannels(p);
  }
  s.directChannels = comm->connPlan.meshChannels;
  s.p2pMaxChannels = comm->p2pMaxChannels;
  s.p2pChannelBytes = comm->p2pChannelBytes;
  s.p2pLLBytes = comm->p2pLLBytes;
  s.p2pLLOnPeerChannels = comm->p2pLLStepBytes > 0;
  s.choices = &comm->planChoices;
  return s;
}

const PlanShape& shapeOf(ncclComm* comm) {
  if (!comm->planShapeReady) {
    comm->planShape = makeShape(comm);
    comm->planShapeReady = true;
  }
  return comm->planShape;
}

// Waits until the kernels have freed n FIFO slots, giving up on abort or after the deadline.
Status reserveFifo(ncclComm* comm, uint32_t n, uint32_t* first) {
  if (n > comm->fifo.capacity()) {
    WEFT_WARN("rank %d: one launch needs %u work slots but the work FIFO has %u", comm->rank, n,
              comm->fifo.capacity());
    return ncclInternalError;
  }
  auto start = std::chrono::steady_clock::now();
  const int64_t timeout = core::kPeerWaitTimeout.get();
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

// Writes one launch's items and returns its kernel arguments. A launch of few items carries
// them in the kernel parameters; otherwise they go to the FIFO, or for a launch captured on
// `captureStream` (nullptr: none) into graph `graphId` to the graph work pool (the FIFO slots
// would be reused before the graph replays).
Status writeWorks(ncclComm* comm, const PlannedLaunch& launch, runtime::Stream captureStream,
                  unsigned long long graphId, dev::DevKernelArgs* args) {
  const bool capturing = captureStream != nullptr;
  uint32_t total = (uint32_t)launch.workCount();
  *args = dev::DevKernelArgs{};
  args->comm = comm->devComm;
  args->nBlocks = (uint32_t)launch.channels.size();
  static const bool stamps = dev::kDiagnosticHooks && kReplayStamps.get() != 0;
  if (capturing && stamps) args->replayStamps = comm->replayStampsDev;  // stream launches have lastLaunchEvent
  dev::DevWork* dst = nullptr;
  uint32_t first = 0;
  static const uint32_t inlineMax = (uint32_t)std::clamp<int64_t>(kInlineWorks.get(), 0, dev::kMaxInlineWorks);
  const bool inlined = total <= inlineMax;
  if (inlined) {
    dst = args->inlineWorks;
    args->worksInline = 1;
  } else if (capturing) {
    const size_t buffers = comm->graphWorks->bufferCount();
    WEFT_TRY(comm->graphWorks->take(total, captureStream, graphId, &dst, &args->works));
    if (comm->graphWorks->bufferCount() != buffers) {
      WEFT_INFO(log::kColl, "rank %d: graph work buffers: %zu (%zu held by graphs); NCCL_WEFT_GRAPH_WORK_ITEMS=%lld",
                comm->rank, comm->graphWorks->bufferCount(), comm->graphWorks->heldCount(),
                (long long)kGraphWorkItems.get());
    }
    args->worksMask = ~0u;
    args->fifoConsumed = nullptr;
  } else {
    args->blockArrivals = comm->blockArrivals;
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
      uint32_t index = inlined || capturing ? pos : comm->fifo.slot(pos);
      dst[index] = w;
      ++pos;
    }
  }
  return ncclSuccess;
}

// The streams of the group's tasks: the first runs the kernels, the others join it by events.
void collectStreams(const std::vector<Task>& tasks, std::vector<runtime::Stream>* streams) {
  for (const Task& t : tasks) {
    bool seen = false;
    for (runtime::Stream s : *streams) seen = seen || s == t.stream;
    if (!seen) streams->push_back(t.stream);
  }
}

// One communicator's part of a group launch: its plan, the stream its kernels go to, and whether
// that stream is being captured.
struct CommLaunches {
  ncclComm* comm = nullptr;
  std::vector<Task> tasks;
  std::vector<LocalCopy> copies;  // one rank: collectives that are plain copies (takeLocalCopies)
  std::vector<PlannedLaunch> launches;
  std::vector<runtime::Stream> streams;
  bool capturing = false;
  unsigned long long graphId = 0;  // the graph being captured, when capturing

  bool hasWork() const { return !launches.empty() || !copies.empty(); }
  // Empties the record and keeps its vectors' storage.
  void reset() {
    comm = nullptr;
    tasks.clear();
    copies.clear();
    launches.clear();
    streams.clear();
    capturing = false;
    graphId = 0;
  }
};

// The calling thread's records for launchQueued, one per communicator of the group, reused from
// call to call: a stream-mode call then allocates only what the planner hands back.
std::vector<CommLaunches>& launchRecords(size_t count) {
  static thread_local std::vector<CommLaunches> records;
  records.resize(count);
  for (CommLaunches& r : records) r.reset();
  return records;
}

// NCCL_GRAPH_MIXING_SUPPORT, or the communicator's graphUsageMode (core/config.h).
bool graphMixing(const ncclComm* comm) {
  return comm->config.graphUsageMode == 2 && runtime::captureNodesSupported();
}

// The communicator's record for the graph `graphId`, if any, marked as just used.
ncclComm::CaptureOrder* findCaptureOrder(ncclComm* comm, unsigned long long graphId) {
  for (ncclComm::CaptureOrder& o : comm->captureOrders) {
    if (o.graphId != graphId) continue;
    o.lastUse = ++comm->captureUses;
    return &o;
  }
  return nullptr;
}

// Whether the graph of capture `graphId` (on `stream`) may hold event nodes. CUDA is asked once per
// capture in this process: communicators that capture into one graph share the answer (asking
// clones the graph, ~1.4 ms per 1000 nodes on an H100 host).
Status eventNodesAllowed(runtime::Stream stream, unsigned long long graphId, bool* allowed) {
  static std::mutex mutex;
  static std::array<std::pair<unsigned long long, bool>, 16> recent{};  // capture ids are never 0
  static size_t next = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& r : recent) {
      if (r.first != graphId) continue;
      *allowed = r.second;
      return ncclSuccess;
    }
  }
  WEFT_TRY(runtime::captureAllowsEventNodes(stream, allowed));
  std::lock_guard<std::mutex> lock(mutex);
  recent[next++ % recent.size()] = {graphId, *allowed};
  return ncclSuccess;
}

// A launch captured into a graph: after the communicator's previous launch in that graph, also
// when captured on another stream forked from the same capture. With NCCL_GRAPH_MIXING_SUPPORT the
// graph's first launch also waits, at each replay, for the communicator's latest launches elsewhere
// (lastLaunchEvent: on streams; graphLaunchEvent: in graphs), and finish() records
// graphLaunchEvent after the graph's latest launch; except in the body of a conditional node, which
// CUDA lets hold no event nodes (NCCL's nodes there fail the graph's instantiation: NCCL issue
// #1986, pytorch issue #180960).
Status orderCapture(ncclComm* comm, runtime::Stream stream, unsigned long long graphId) {
  if (ncclComm::CaptureOrder* order = findCaptureOrder(comm, graphId)) {
    if (stream != order->stream) WEFT_TRY(runtime::captureAddDependencies(stream, order->tail));
    return ncclSuccess;
  }
  const bool mixing = graphMixing(comm);
  bool eventNodes = mixing;
  if (mixing) WEFT_TRY(eventNodesAllowed(stream, graphId, &eventNodes));
  if (eventNodes) {
    WEFT_TRY(runtime::captureWaitEvent(stream, comm->lastLaunchEvent));
    WEFT_TRY(runtime::captureWaitEvent(stream, comm->graphLaunchEvent));
    comm->graphsOrdered = true;
  } else if (mixing) {
    WEFT_INFO(log::kGraph,
              "rank %d: a call captured into the body of a CUDA graph conditional node (graph %llu), where CUDA "
              "allows no event nodes: its kernels follow this communicator's other work by the graph's own "
              "order and the stream the graph is launched on only, as with NCCL_GRAPH_MIXING_SUPPORT=0",
              comm->rank, graphId);
  }
  // Recorded once the waits are in, with them as the tail: should this launch add no kernel, a
  // later one into the graph on another stream still starts after them.
  ncclComm::CaptureOrder order;
  order.graphId = graphId;
  order.stream = stream;
  order.eventNodes = eventNodes;
  WEFT_TRY(runtime::captureFrontier(stream, &order.tail));
  order.lastUse = ++comm->captureUses;
  comm->capturedLaunches.store(true, std::memory_order_release);
  // A capture's end is not seen here, so records are kept for the graphs used last: captures of
  // one communicator rarely interleave, and one still going whose record was dropped (32 others
  // used since its last launch) would lose the order between its launches on forked streams and
  // get a second record node of graphLaunchEvent (the first, left behind an earlier launch, may
  // run after it at a replay: stream launches would then wait too little).
  constexpr size_t kKeptCaptures = 32;
  std::vector<ncclComm::CaptureOrder>& orders = comm->captureOrders;
  if (orders.size() >= kKeptCaptures) {
    auto oldest = std::min_element(orders.begin(), orders.end(),
                                   [](const auto& a, const auto& b) { return a.lastUse < b.lastUse; });
    *oldest = std::move(order);
  } else {
    orders.push_back(std::move(order));
  }
  return ncclSuccess;
}

// After a captured launch: where it ended and, with NCCL_GRAPH_MIXING_SUPPORT, the graph's one
// record of graphLaunchEvent moved behind it (behind the graph's latest launch only, so that the
// launches stay a chain of kernels: CUDA runs a chain faster than kernels that branch out).
Status noteCapturedLaunch(ncclComm* comm, runtime::Stream stream, unsigned long long graphId) {
  ncclComm::CaptureOrder* order = findCaptureOrder(comm, graphId);
  if (order == nullptr) return ncclSuccess;
  WEFT_TRY(runtime::captureFrontier(stream, &order->tail));
  order->stream = stream;
  if (order->eventNodes) {
    WEFT_TRY(runtime::captureRecordEventAfter(stream, comm->graphLaunchEvent, order->tail, &order->record));
  }
  return ncclSuccess;
}

// Takes the queued tasks, plans them and makes the first stream wait for the others and for the
// communicator's previous kernels. `out` is empty; the tasks' vector it holds goes back to the
// communicator for the next calls (its storage is reused).
Status prepare(ncclComm* comm, runtime::ScopedDevice* device, CommLaunches* out) {
  out->comm = comm;
  out->tasks.swap(comm->tasks);
  collectStreams(out->tasks, &out->streams);  // before the copies leave: their streams join too
  takeLocalCopies(&out->tasks, comm->nRanks, &out->copies);
  core::markSymmetricTasks(comm, &out->tasks);
  Clock::time_point t = profiling() ? Clock::now() : Clock::time_point{};
  WEFT_TRY(planTasks(out->tasks, shapeOf(comm), &out->launches));
  if (profiling()) lap(&t, &comm->hostProfile.planUs);
  if (!out->hasWork()) return ncclSuccess;
  WEFT_TRY(device->set(comm->cudaDev));
  runtime::Stream stream = out->streams[0];
  runtime::CaptureInfo capture;
  WEFT_TRY(runtime::streamCaptureInfo(stream, &capture));
  if (capture.status == runtime::CaptureStatus::kInvalidated) {
    // Said here, once, rather than as the CUDA error of whichever call meets the stream next.
    WEFT_WARN("rank %d: the CUDA graph capture of stream %p was invalidated by an earlier operation on it (one "
              "not allowed while capturing); none of this call's work was queued. End the capture "
              "(cudaStreamEndCapture fails and gives no graph) and capture again: the communicator is unharmed",
              comm->rank, (void*)stream);
    return ncclInvalidUsage;
  }
  out->capturing = capture.status == runtime::CaptureStatus::kActive;
  out->graphId = capture.graphId;
  // Kernels of one communicator must not overlap: they share connections and step counters.
  if (out->capturing) {
    WEFT_TRY(orderCapture(comm, stream, out->graphId));
  } else {
    if (comm->haveLaunched && comm->lastLaunchStream != stream) {
      WEFT_TRY(runtime::streamWaitEvent(stream, comm->lastLaunchEvent));
    }
    // A graph may have been replayed on another stream since (no way to know, so always).
    if (comm->graphsOrdered) WEFT_TRY(runtime::streamWaitEvent(stream, comm->graphLaunchEvent));
  }
  for (size_t i = 1; i < out->streams.size(); ++i) {
    WEFT_TRY(runtime::eventRecord(comm->joinEvent, out->streams[i]));
    WEFT_TRY(runtime::streamWaitEvent(stream, comm->joinEvent));
  }
  return ncclSuccess;
}

// The peers whose point-to-point-only connections this communicator's launches use before they are made:
// senders to this rank (*senders) and receivers of it (*receivers). Both ends of a transfer plan
// the same channels for it, so each end finds the other here in the same group.
void peersToConnect(const CommLaunches& c, std::vector<int>* senders, std::vector<int>* receivers) {
  const transport::P2pConnections& p2p = *c.comm->p2p;
  auto add = [](std::vector<int>* list, int peer) {
    if (std::find(list->begin(), list->end(), peer) == list->end()) list->push_back(peer);
  };
  for (const PlannedLaunch& launch : c.launches) {
    for (size_t b = 0; b < launch.channels.size(); ++b) {
      const int channel = launch.channels[b];
      if (channel >= c.comm->nChannels) continue;  // a copy lane: no connections
      for (const dev::DevWork& w : launch.works[b]) {
        if (w.func != dev::kFuncSendRecv) continue;
        if (w.sendPeer >= 0 && w.sendPeer != c.comm->rank && p2p.sendNeedsConnect(channel, w.sendPeer))
          add(receivers, w.sendPeer);
        if (w.recvPeer >= 0 && w.recvPeer != c.comm->rank && p2p.recvNeedsConnect(channel, w.recvPeer))
          add(senders, w.recvPeer);
      }
    }
  }
}

// Makes the point-to-point-only connections the group uses for the first time: every communicator offers
// its receive buffers before any waits for a peer's offer, since one thread may drive both ends.
// A communicator that fails launches nothing (its kernels would find no buffer).
Status connectOnFirstUse(std::vector<CommLaunches>& all, std::vector<ncclComm*>* untouched) {
  auto mayConnect = [](const CommLaunches& c) {
    return !c.launches.empty() && c.comm->p2p && c.comm->p2p->anyPending();
  };
  // Every launch passes here: once all connections are made (always, with two ranks) it costs
  // one check per communicator and allocates nothing.
  if (std::none_of(all.begin(), all.end(), mayConnect)) return ncclSuccess;
  std::vector<std::vector<int>> senders(all.size()), receivers(all.size());
  bool any = false;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!mayConnect(all[i])) continue;
    peersToConnect(all[i], &senders[i], &receivers[i]);
    any = any || !senders[i].empty() || !receivers[i].empty();
  }
  if (!any) return ncclSuccess;
  runtime::RelaxedCaptureMode relaxed;  // allocations, in case a stream is being captured
  Status first = ncclSuccess;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < all.size(); ++i) {
      std::vector<int>& peers = pass == 0 ? senders[i] : receivers[i];
      if (peers.empty() || all[i].launches.empty()) continue;
      ncclComm* comm = all[i].comm;
      runtime::ScopedDevice device;
      runtime::MemTallyScope charged(comm->memTally, runtime::MemUse::kConnections,
                                     pass == 0 ? comm->memoryLabel() + ": point-to-point connections made on first use"
                                               : std::string());
      Status s = device.set(comm->cudaDev);
      if (!isError(s)) s = pass == 0 ? comm->p2p->offerReceives(comm, peers) : comm->p2p->acceptSends(comm, peers);
      if (isError(s)) {
        WEFT_WARN("rank %d: could not connect point-to-point channels %s rank(s) on first use; this group's kernels "
                  "on this communicator are not launched", comm->rank, pass == 0 ? "from" : "to");
        if (core::adoptHostFinding(comm)) s = ncclInvalidUsage;  // the peer refused a call that differed
        all[i].launches.clear();  // before any of them reached a stream
        if (untouched && all[i].copies.empty()) untouched->push_back(comm);
        if (!isError(first)) first = s;
      }
    }
  }
  return first;
}

// Zero-copy point-to-point (transport/p2p/reg_sharing.h): maps what peers shared, names the
// registration of each registered receive part and flags the registered send parts to peers that
// shared something. One check per communicator when nothing is registered and nothing came.
void shareRegistrations(std::vector<CommLaunches>& all, runtime::ScopedDevice* device) {
  static const bool directSends = kDirectSends.get() != 0;
  for (CommLaunches& c : all) {
    ncclComm* comm = c.comm;
    if (c.launches.empty() || !comm->p2p || comm->p2p->sharing() == nullptr) continue;
    transport::p2p::RegSharing& sharing = *comm->p2p->sharing();
    if (!c.capturing) {  // slot writes stay out of graphs; a later eager launch takes the messages
      Status s = device->set(comm->cudaDev);
      if (!isError(s)) s = sharing.absorb(comm, c.streams[0]);
      if (isError(s)) WEFT_WARN("rank %d: could not update the peers' shared registrations", comm->rank);
    }
    if (comm->registrations->empty()) continue;
    for (PlannedLaunch& launch : c.launches) {
      if (launch.proto != dev::kProtoSimple) continue;
      for (dev::DevWork& w : launch.works.items()) {
        if (w.func != dev::kFuncSendRecv) continue;
        const uint64_t es = (uint64_t)dev::dataTypeBytes(w.dataType);
        core::Registration reg;
        if (w.recvPeer >= 0 && w.recvPeer != comm->rank && w.recvCount > 0) {
          const char* part = static_cast<const char*>(w.recvBuff) + w.recvOffset * es;
          if (comm->registrations->findRange((uintptr_t)part, w.recvCount * es, &reg)) {
            uint64_t token = 0, offset = 0;
            sharing.shareForReceive(comm, w.recvPeer, reg, part, &token, &offset);
            if (token != 0) {
              w.redOpArg = token;
              w.count = offset - w.recvOffset * es;  // modulo 2^64: the kernel adds recvOffset * es back
            }
          }
        }
        if (directSends && w.sendPeer >= 0 && w.sendPeer != comm->rank && w.chanCount > 0 &&
            sharing.hasSlots(w.sendPeer)) {
          const char* part = static_cast<const char*>(w.sendBuff) + w.chanOffset * es;
          if (comm->registrations->findRange((uintptr_t)part, w.chanCount * es, &reg))
            w.flags |= dev::kWorkFlagDirectSend;
        }
      }
    }
  }
}

Status launchOne(const CommLaunches& c, size_t index, runtime::ScopedDevice* device) {
  WEFT_TRY(device->set(c.comm->cudaDev));
  const PlannedLaunch& launch = c.launches[index];
  const dev::Proto proto = (dev::Proto)launch.proto;
  const void* fn = nullptr;
  static const bool specialKernels = kSpecialKernels.get() != 0;  // read once: launches are hot
  static const uint64_t inlineSumBytes = (uint64_t)std::max<int64_t>(0, kInlineSumBytes.get());
  if (specialKernels) fn = dev::specialKernelFunction(specialKernelOfLaunch(launch, inlineSumBytes));
  if (fn == nullptr) fn = dev::kernelFunction(proto);
  if (fn == nullptr) {
    // isSupported said yes to a protocol the build has no kernel for: a device-code bug.
    WEFT_WARN("rank %d: no kernel is built for protocol %d, which the tuner chose", c.comm->rank, launch.proto);
    return ncclInternalError;
  }
  ncclComm::HostProfile& profile = c.comm->hostProfile;
  Clock::time_point t = profiling() ? Clock::now() : Clock::time_point{};
  dev::DevKernelArgs args;
  WEFT_TRY(writeWorks(c.comm, launch, c.capturing ? c.streams[0] : nullptr, c.graphId, &args));
  if (profiling()) lap(&t, &profile.writeUs);
  void* params[] = {&args};
  if (c.comm->anyNet && c.comm->p2p) c.comm->p2p->wakeNetwork();
  // Not where ranks share the GPU (tests only): their kernels must all be resident at once, and a
  // kernel launched early holds SMs while it waits for the one before it, which may wait for
  // another rank's kernel that then finds no SM free (4 ranks on one H100, CUDA graphs: a hang).
  static const int64_t overlap = kOverlapLaunches.get();
  Status launched = runtime::launchKernel(fn, runtime::Dim3(args.nBlocks), runtime::Dim3(dev::kernelThreads(proto)),
                                          params, dev::kernelDynamicSmem(proto), c.streams[0],
                                          overlap >= 2 || (overlap == 1 && !c.comm->sharesGpu));
  if (profiling()) {
    lap(&t, &profile.launchUs);
    profile.launches++;
    profile.items += launch.workCount();
  }
  return launched;
}

// A copy of at least this many bytes captured in a CUDA graph runs as weft's copy kernel: the
// memcpy node a captured cudaMemcpyAsync becomes slows down past 256 MiB on an H200 (session 21,
// us at 256M/512M/1G: node 126/388/774, kernel 140/281/562; a stream's cudaMemcpyAsync 1G: 503).
const param::IntParam kGraphCopyKernelBytes{"NCCL_WEFT_GRAPH_COPY_KERNEL_BYTES", 512 << 20};

Status copyKernel(const LocalCopy& copy, int smCount, runtime::Stream stream) {
  void* dst = copy.dst;  // the kernel's uint4 pointers, passed by value as the same bits
  const void* src = copy.src;
  uint64_t words = copy.bytes / 16;
  char* dstTail = static_cast<char*>(copy.dst) + words * 16;
  const char* srcTail = static_cast<const char*>(copy.src) + words * 16;
  int tailBytes = (int)(copy.bytes % 16);
  void* args[] = {&dst, &src, &words, &dstTail, &srcTail, &tailBytes};
  return runtime::launchKernel(dev::localCopyKernel(), runtime::Dim3(std::max(1, smCount) * 4),
                               runtime::Dim3(dev::localCopyThreads()), args, 0, stream);
}

// One rank's copies, on the stream the kernels run on.
Status runCopies(const CommLaunches& c, runtime::ScopedDevice* device) {
  if (c.copies.empty()) return ncclSuccess;
  WEFT_TRY(device->set(c.comm->cudaDev));
  const int64_t kernelBytes = kGraphCopyKernelBytes.get();
  for (const LocalCopy& copy : c.copies) {
    const bool aligned = (((uintptr_t)copy.dst | (uintptr_t)copy.src) & 15) == 0;
    if (c.capturing && aligned && kernelBytes > 0 && copy.bytes >= (uint64_t)kernelBytes) {
      WEFT_TRY(copyKernel(copy, c.comm->smCount, c.streams[0]));
    } else {
      WEFT_TRY(runtime::deviceMemcpyAsync(copy.dst, copy.src, copy.bytes, c.streams[0]));
    }
  }
  return ncclSuccess;
}

// The other streams wait for the kernels; the communicator remembers where they ran.
Status finish(const CommLaunches& c, runtime::ScopedDevice* device) {
  if (!c.hasWork()) return ncclSuccess;
  ncclComm* comm = c.comm;
  WEFT_TRY(device->set(comm->cudaDev));
  runtime::Event done = c.capturing ? comm->joinEvent : comm->lastLaunchEvent;
  WEFT_TRY(runtime::eventRecord(done, c.streams[0]));
  for (size_t i = 1; i < c.streams.size(); ++i) WEFT_TRY(runtime::streamWaitEvent(c.streams[i], done));
  if (!c.capturing) {
    comm->lastLaunchStream = c.streams[0];
    comm->haveLaunched = true;
  } else {
    WEFT_TRY(noteCapturedLaunch(comm, c.streams[0], c.graphId));  // after the joins: they add no node
  }
  WEFT_TRACE(log::kColl, "rank %d: launched %zu kernel(s) for %zu task(s)%s", comm->rank, c.launches.size(),
             c.tasks.size(), c.capturing ? " into a CUDA graph" : "");
  return ncclSuccess;
}

}  // namespace

Status makeGraphWorkPool(ncclComm* comm) {
  GraphWorkPool::Hooks hooks;
  hooks.alloc = [tally = comm->memTally](size_t bytes, void** host, void** devView) -> Status {
    runtime::RelaxedCaptureMode relaxed;  // should a capture outgrow the pool: no allocation in a strict one
    runtime::MemTallyScope charged(tally, runtime::MemUse::kGraphs);
    WEFT_TRY(runtime::pinnedBlockAcquire(bytes, host));
    const Status s = runtime::hostDevicePointer(*host, devView);
    if (isError(s)) runtime::pinnedBlockRelease(*host);
    return s;
  };
  hooks.free = [](void* host) { runtime::pinnedBlockRelease(host); };
  if (runtime::captureNodesSupported() && kGraphWorkReuse.get() != 0) hooks.tie = runtime::captureOnGraphGone;
  const int64_t items = std::clamp<int64_t>(kGraphWorkItems.get(), 1, 1 << 20);
  comm->graphWorks = std::make_unique<GraphWorkPool>(std::move(hooks), (uint32_t)items);
  return comm->graphWorks->reserve();
}

Status launchQueued(ncclComm* const* comms, size_t count, std::vector<ncclComm*>* untouched) {
  const Clock::time_point start = profiling() ? Clock::now() : Clock::time_point{};
  std::vector<CommLaunches>& all = launchRecords(count);
  // One device guard for the whole call: each step selects its communicator's GPU (a CUDA call
  // only when it differs from the current one) and the caller's device is restored at the end.
  runtime::ScopedDevice device;
  Status first = ncclSuccess;
  auto keep = [&first](Status s) {
    if (isError(s) && !isError(first)) first = s;
  };
  size_t rounds = 0;
  for (size_t i = 0; i < count; ++i) {
    Status s = prepare(comms[i], &device, &all[i]);
    if (!isError(s)) s = runCopies(all[i], &device);
    if (isError(s)) {  // this communicator launches nothing more; the others go on
      all[i].launches.clear();
      all[i].copies.clear();
      if (untouched) untouched->push_back(comms[i]);
    }
    keep(s);
  }
  keep(connectOnFirstUse(all, untouched));
  shareRegistrations(all, &device);
  for (const CommLaunches& c : all) rounds = std::max(rounds, c.launches.size());
  // Round robin over the communicators: when one thread drives several GPUs, a communicator's
  // k-th kernel waits for its peers' k-th kernels, so all of them must be launched before any
  // k+1-th kernel can need FIFO slots that only the k-th kernel's start would free.
  for (size_t r = 0; r < rounds; ++r) {
    for (CommLaunches& c : all) {
      if (r >= c.launches.size()) continue;
      Status s = launchOne(c, r, &device);
      if (isError(s)) {
        c.launches.resize(r);  // later kernels of this communicator are dropped
        if (untouched && r == 0 && c.copies.empty()) untouched->push_back(c.comm);
      }
      keep(s);
    }
  }
  for (const CommLaunches& c : all) keep(finish(c, &device));
  if (profiling()) {
    for (size_t i = 0; i < count; ++i) {
      ncclComm* comm = comms[i];
      Clock::time_point t = start;
      lap(&t, &comm->hostProfile.totalUs);
      comm->hostProfile.calls++;
    }
  }
  return first;
}

void reportHostProfile(const ncclComm* comm) {
  const ncclComm::HostProfile& p = comm->hostProfile;
  if (!profiling() || p.calls == 0) return;
  const double calls = (double)p.calls;
  WEFT_INFO(log::kAll,
             "rank %d: host time per enqueue call (%llu calls, %.2f launches and %.1f items per call): total %.2f us, "
             "plan %.2f, write items %.2f, launch %.2f, the rest %.2f (NCCL_WEFT_HOST_PROFILE)",
             comm->rank, (unsigned long long)p.calls, (double)p.launches / calls, (double)p.items / calls,
             p.totalUs / calls, p.planUs / calls, p.writeUs / calls, p.launchUs / calls,
             (p.totalUs - p.planUs - p.writeUs - p.launchUs) / calls);
}

Status estimateQueuedMicroseconds(ncclComm* comm, double* us) {
  core::markSymmetricTasks(comm, &comm->tasks);
  return estimateTasks(comm->tasks, shapeOf(comm), us);
}

}  // namespace weft::enqueue
